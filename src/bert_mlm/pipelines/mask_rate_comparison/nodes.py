"""Nodes of the ``mask_rate_comparison`` pipeline: train and evaluate one model per variant
(a Kedro namespace), then compare them in one table and report."""

from __future__ import annotations

import pandas as pd

from bert_mlm.core.report import compare_variants
from bert_mlm.core.tuning_result import TuningResult


def variant_overrides(overrides: dict) -> TuningResult:
    """The variant's ``masking``/``training`` values, as the result the training node applies in
    place of the tuning study's."""
    return TuningResult.for_variant(overrides)


def compare_mask_rates(**inputs) -> tuple[pd.DataFrame, str]:
    """``inputs`` holds ``<variant>_metrics``, ``<variant>_history`` and ``<variant>_finetune``
    (its fine-tuning metrics, empty without ``finetune.train_path``) for every variant."""
    names = sorted(k.removesuffix("_metrics") for k in inputs if k.endswith("_metrics"))
    return compare_variants({n: inputs[f"{n}_metrics"] for n in names}, {n: inputs[f"{n}_history"] for n in names},
                            {n: inputs.get(f"{n}_finetune") or {} for n in names})
