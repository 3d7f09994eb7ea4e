"""The `finetune` pipeline."""

from bert_mlm.pipelines.finetune.pipeline import create_pipeline

__all__ = ["create_pipeline"]
