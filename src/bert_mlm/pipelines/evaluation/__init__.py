"""The `evaluation` pipeline."""

from bert_mlm.pipelines.evaluation.pipeline import create_pipeline

__all__ = ["create_pipeline"]
