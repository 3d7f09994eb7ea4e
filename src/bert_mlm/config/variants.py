"""The mask-rate variants' ``overrides`` (``conf/base/parameters_mask_rate_comparison.yml``): each
variant's own masking and training values; everything else is shared."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from bert_mlm.config.base import Section
from bert_mlm.config.masking import MaskingConfig
from bert_mlm.config.training import TrainingConfig
from bert_mlm.errors import UserError


class VariantOverrides(Section):
    """A mask-rate variant's own masking and training values (everything else is shared)"""

    SECTION = "overrides"
    UNKNOWN_KEY = "only masking and training can be overridden per variant"

    masking: dict[str, Any] = Field(
        default_factory=dict, description="masking values this variant trains with instead of the shared ones",
        json_schema_extra={"requirement": "a mapping of masking values"})
    training: dict[str, Any] = Field(
        default_factory=dict, description="training values this variant trains with (its own checkpoint_dir)",
        json_schema_extra={"requirement": "a mapping of training values"})

    def sections(self, masking: MaskingConfig, training: TrainingConfig) -> tuple[MaskingConfig, TrainingConfig]:
        """The shared sections with this variant's values in place."""
        return masking.updated(self.masking), training.updated(self.training)


def variant_overrides(name: str, values: Any) -> VariantOverrides:
    """The ``overrides`` of the variant ``name`` from its parameters (``{overrides: {...}}``)."""
    if values is None:
        values = {}
    if not isinstance(values, Mapping):
        raise UserError(f"{name}: {values!r} must be a mapping with the variant's overrides")
    unknown = sorted(set(values) - {"overrides"})
    if unknown:
        raise UserError(f"{name}: unknown parameter(s) {', '.join(f'{name}.{key}' for key in unknown)}; "
                        "a variant holds overrides: {masking: {...}, training: {...}}")
    return VariantOverrides.build(values.get("overrides"), f"{name}.overrides")
