"""Nodes of the ``finetune`` pipeline: fine-tune the trained model and its starting point on a
labelled task, paired seed by seed."""

from __future__ import annotations

import pandas as pd

from bert_mlm.config import FinetuneConfig, ModelConfig, TrainingConfig
from bert_mlm.core.finetune.result import FinetuneResults
from bert_mlm.core.finetune.runs import evaluate_finetuning, starting_point
from bert_mlm.datasets.pretrained import Classifier, MaskedLM


def finetune_classifier(
    trained_model: MaskedLM, config: FinetuneConfig, model: ModelConfig, training: TrainingConfig
) -> tuple[FinetuneResults, pd.DataFrame, dict, Classifier]:
    """The task's result (accuracy, macro-F1, the paired gain over the starting point with its
    interval) for the model fine-tuned (``model_version``), a row per model, seed and epoch, the
    label mapping, and the first seed's classifier when ``finetune.save_model`` is true. Without
    ``finetune.train_path`` every output is empty, and its dataset writes no version: the newest
    fine-tuning result stays the last real one."""
    if not config.enabled:
        return FinetuneResults(), pd.DataFrame(), {}, Classifier()
    baseline, baseline_name = starting_point(config, trained_model.model, trained_model.tokenizer, model.init_from,
                                             training.seed)
    runs = evaluate_finetuning(trained_model.model, trained_model.tokenizer, config, baseline=baseline,
                               baseline_name=baseline_name, device=training.device, precision=training.precision)
    # The run summary logs its sentence (bert_mlm.hooks.NodeTimingHook), once.
    results = FinetuneResults((runs.task_result(),), trained_model.version)
    return results, runs.runs, runs.prepared.task.label_mapping(), Classifier(runs.classifier, trained_model.tokenizer)
