"""Nodes of the ``finetune`` pipeline: fine-tune the trained model and its starting point on a
labelled task, paired seed by seed."""

from __future__ import annotations

import pandas as pd

from bert_mlm.config import FinetuneConfig, ModelConfig, TrainingConfig
from bert_mlm.core.finetune import RUN_COLUMNS, evaluate_finetuning, starting_point
from bert_mlm.datasets.pretrained import Classifier, MaskedLM


def finetune_classifier(
    trained_model: MaskedLM, config: FinetuneConfig, model: ModelConfig, training: TrainingConfig
) -> tuple[dict, pd.DataFrame, dict, Classifier]:
    """Fine-tuning metrics (accuracy, macro-F1, the paired gain over the starting point with its
    interval), a row per model, seed and epoch, the label mapping, and the first seed's
    classifier when ``finetune.save_model`` is true; empty results without ``finetune.train_path``."""
    if not config.enabled:
        return {}, pd.DataFrame(columns=RUN_COLUMNS), {}, Classifier()
    baseline, baseline_name = starting_point(config, trained_model.model, trained_model.tokenizer, model.init_from,
                                             training.seed)
    result = evaluate_finetuning(trained_model.model, trained_model.tokenizer, config, baseline=baseline,
                                 baseline_name=baseline_name, device=training.device, precision=training.precision)
    metrics = result.metrics()  # the run summary logs its sentence (bert_mlm.hooks.NodeTimingHook), once
    kept = Classifier(result.classifier, trained_model.tokenizer) if result.classifier is not None else Classifier()
    return metrics, result.runs, result.prepared.task.label_mapping(), kept
