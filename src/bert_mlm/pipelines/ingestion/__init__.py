"""The `ingestion` pipeline."""

from bert_mlm.pipelines.ingestion.pipeline import create_pipeline

__all__ = ["create_pipeline"]
