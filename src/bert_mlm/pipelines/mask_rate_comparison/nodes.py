"""Nodes of the ``mask_rate_comparison`` pipeline: train and evaluate one model per variant
(a Kedro namespace), then compare them in one table and report."""

from __future__ import annotations

import pandas as pd

from bert_mlm.config import MaskingConfig, TrainingConfig, VariantOverrides
from bert_mlm.core.record.report import compare_variants
from bert_mlm.core.record.results import belongs
from bert_mlm.core.study.record import TuningRecord


def variant_sections(
    masking: MaskingConfig, training: TrainingConfig, overrides: VariantOverrides
) -> tuple[MaskingConfig, TrainingConfig, TuningRecord]:
    """The variant's masking and training sections (the shared ones with its overrides in place),
    which its training node takes where the default chain takes the tuning stage's, and its record."""
    return (*overrides.sections(masking, training), TuningRecord.of_variant(overrides))


def compare_mask_rates(**inputs) -> tuple[pd.DataFrame, str]:
    """``inputs`` holds ``<variant>_metrics``, ``<variant>_history`` and ``<variant>_finetune``
    (its newest fine-tuning metrics, used only where they were made for the variant's model: empty
    without ``finetune.train_path``) for every variant."""
    names = sorted(k.removesuffix("_metrics") for k in inputs if k.endswith("_metrics"))
    metrics = {n: inputs[f"{n}_metrics"] for n in names}
    finetune = {n: inputs.get(f"{n}_finetune") or {} for n in names}
    return compare_variants(metrics, {n: inputs[f"{n}_history"] for n in names},
                            {n: f if belongs(f.get("finetune_model_version"), metrics[n].get("model_version")) else {}
                             for n, f in finetune.items()})
