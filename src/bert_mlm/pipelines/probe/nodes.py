"""Nodes of the ``probe`` pipeline: a linear probe of the trained encoder's sentence vectors."""

from __future__ import annotations

import logging

from bert_mlm.core.probe import ProbeConfig, run_probe
from bert_mlm.datasets.pretrained import MaskedLM

logger = logging.getLogger(__name__)


def probe_representations(trained_model: MaskedLM, config: ProbeConfig) -> dict:
    """Probe accuracy (± its standard error) on ``probe.train_path`` / ``probe.eval_path``; an
    empty result when no probe dataset is configured."""
    if not config.enabled:
        logger.info("probe.train_path is not set: no downstream probe")
        return {}
    result = run_probe(trained_model.model, trained_model.tokenizer, config)
    logger.info(
        "Probe accuracy %.4f ± %.4f on %d examples (majority class %.4f)", result["probe_accuracy"],
        result["probe_accuracy_se"], result["probe_eval_examples"], result["probe_majority_accuracy"],
    )
    return result
