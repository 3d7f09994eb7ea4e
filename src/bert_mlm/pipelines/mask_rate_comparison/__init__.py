"""The `mask_rate_comparison` pipeline."""

from bert_mlm.pipelines.mask_rate_comparison.pipeline import VARIANTS, create_pipeline

__all__ = ["VARIANTS", "create_pipeline"]
