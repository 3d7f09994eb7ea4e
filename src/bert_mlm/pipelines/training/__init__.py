"""The `training` pipeline."""

from bert_mlm.pipelines.training.pipeline import create_pipeline

__all__ = ["create_pipeline"]
