"""The `probe` pipeline."""

from bert_mlm.pipelines.probe.pipeline import create_pipeline

__all__ = ["create_pipeline"]
