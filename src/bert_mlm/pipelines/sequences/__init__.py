"""The `sequences` pipeline."""

from bert_mlm.pipelines.sequences.pipeline import create_pipeline

__all__ = ["create_pipeline"]
