"""The `reporting` pipeline."""

from bert_mlm.pipelines.reporting.pipeline import create_pipeline, model_results

__all__ = ["create_pipeline", "model_results"]
