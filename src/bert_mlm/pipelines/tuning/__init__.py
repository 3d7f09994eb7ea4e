"""The `tuning` pipeline."""

from bert_mlm.pipelines.tuning.pipeline import create_pipeline

__all__ = ["create_pipeline"]
