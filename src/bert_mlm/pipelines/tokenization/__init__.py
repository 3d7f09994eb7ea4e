"""The `tokenization` pipeline."""

from bert_mlm.pipelines.tokenization.pipeline import create_pipeline

__all__ = ["create_pipeline"]
