"""Nodes of the ``finetune`` pipeline: fine-tune the trained model and its starting point on a
labelled task, paired seed by seed."""

from __future__ import annotations

import pandas as pd

from bert_mlm.config import FinetuneConfig, ModelConfig, TrainingConfig
from bert_mlm.core.finetune.runs import evaluate_finetuning, starting_point
from bert_mlm.core.record.results import NOT_RUN
from bert_mlm.datasets.pretrained import Classifier, MaskedLM


def finetune_classifier(
    trained_model: MaskedLM, config: FinetuneConfig, model: ModelConfig, training: TrainingConfig
) -> tuple[dict, pd.DataFrame, dict, Classifier]:
    """Fine-tuning metrics (accuracy, macro-F1, the paired gain over the starting point with its
    interval), a row per model, seed and epoch, the label mapping, and the first seed's
    classifier when ``finetune.save_model`` is true. The metrics name the model fine-tuned
    (``finetune_model_version``). Without ``finetune.train_path`` nothing is produced (``NOT_RUN``):
    no version is written, and the newest fine-tuning result stays the last real one."""
    if not config.enabled:
        return NOT_RUN, NOT_RUN, NOT_RUN, NOT_RUN
    baseline, baseline_name = starting_point(config, trained_model.model, trained_model.tokenizer, model.init_from,
                                             training.seed)
    result = evaluate_finetuning(trained_model.model, trained_model.tokenizer, config, baseline=baseline,
                                 baseline_name=baseline_name, device=training.device, precision=training.precision)
    # The run summary logs its sentence (bert_mlm.hooks.NodeTimingHook), once.
    metrics = {**result.metrics(), "finetune_model_version": trained_model.version}
    kept = Classifier(result.classifier, trained_model.tokenizer) if result.classifier is not None else Classifier()
    return metrics, result.runs, result.prepared.task.label_mapping(), kept
