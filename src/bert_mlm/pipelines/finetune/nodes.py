"""Nodes of the ``finetune`` pipeline: fine-tune the trained model and its baselines on each
labelled task, paired seed by seed."""

from __future__ import annotations

import pandas as pd

from bert_mlm.config import FinetuneConfig, ModelConfig, TrainingConfig
from bert_mlm.core.finetune.result import FinetuneResults
from bert_mlm.core.finetune.runs import evaluate_finetuning, starting_points
from bert_mlm.datasets.pretrained import Classifier, MaskedLM


def finetune_classifier(
    trained_model: MaskedLM, config: FinetuneConfig, model: ModelConfig, training: TrainingConfig
) -> tuple[FinetuneResults, pd.DataFrame, dict, Classifier]:
    """Each task's result (its scores and paired gains over each baseline), a row per task, model,
    seed and epoch, the label mapping (by task name where there are several), and the first seed's
    models when ``finetune.save_model`` is true. Without a task every output is empty, and writes
    no version: the newest fine-tuning result stays the last real one."""
    if not config.enabled:
        return FinetuneResults(), pd.DataFrame(), {}, Classifier()
    encoder, tokenizer = trained_model.model, trained_model.tokenizer
    tasks = [evaluate_finetuning(encoder, tokenizer, task, name=name, device=training.device,
                                 precision=training.precision,
                                 baselines=starting_points(task, encoder, tokenizer, model, training.seed))
             for name, task in config.task_configs().items()]  # each task fine-tuned and paired on its own
    # The run summary logs each task's sentence (bert_mlm.hooks.summary.NodeTimingHook), once.
    results = FinetuneResults(tuple(task.task_result() for task in tasks), trained_model.version)
    mappings = {task.name: task.prepared.task.label_mapping() for task in tasks}
    kept = {task.name: task.classifier for task in tasks if task.classifier is not None}
    return (results, pd.concat([task.runs for task in tasks], ignore_index=True),
            mappings[""] if "" in mappings else mappings, Classifier(kept, tokenizer))
