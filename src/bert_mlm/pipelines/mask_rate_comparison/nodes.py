"""Nodes of the ``mask_rate_comparison`` pipeline: train and evaluate one model per variant
(a Kedro namespace), then compare them in one table and report."""

from __future__ import annotations

import pandas as pd

from bert_mlm.config import MaskingConfig, TrainingConfig, VariantOverrides
from bert_mlm.core.record.report import compare_variants
from bert_mlm.core.study.record import TuningRecord


def variant_sections(
    masking: MaskingConfig, training: TrainingConfig, overrides: VariantOverrides
) -> tuple[MaskingConfig, TrainingConfig, TuningRecord]:
    """The variant's masking and training sections (the shared ones with its overrides in place),
    which its training node takes where the default chain takes the tuning stage's, and its record."""
    return (*overrides.sections(masking, training), TuningRecord.of_variant(overrides))


def compare_mask_rates(**inputs) -> tuple[pd.DataFrame, str]:
    """Every variant's ``<variant>_metrics``, ``_history`` and ``_finetune`` (used only where they
    were made for the variant's model) in one table and report."""
    names = sorted(k.removesuffix("_metrics") for k in inputs if k.endswith("_metrics"))
    results = {n: inputs[f"{n}_metrics"] for n in names}
    finetune = {n: found for n in names if (found := inputs.get(f"{n}_finetune"))
                and found.model_version == results[n].model_version}
    return compare_variants(results, {n: inputs[f"{n}_history"] for n in names}, finetune)
