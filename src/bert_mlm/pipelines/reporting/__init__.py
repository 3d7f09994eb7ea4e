"""The `reporting` pipeline."""

from bert_mlm.pipelines.reporting.pipeline import create_pipeline

__all__ = ["create_pipeline"]
