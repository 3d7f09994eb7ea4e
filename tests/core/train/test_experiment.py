"""Assembling a run: a tuning trial trains with the collator of its own masking; validation
during training runs on the valid split with its own budget."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest

from bert_mlm.config import EvaluationConfig, MaskingConfig, ModelConfig, SequenceConfig, TrainingConfig
from bert_mlm.errors import UserError


def test_a_trial_trains_with_the_collator_of_its_own_masking(tiny_tokenizer, monkeypatch):
    from bert_mlm.config import EvaluationConfig, ModelConfig, SequenceConfig
    from bert_mlm.core.train import experiment as experiment_module

    seen = []
    monkeypatch.setattr(experiment_module, "train", lambda model, sequences, ids, masking, training, collator, *rest:
                        seen.append((masking.whole_word, collator.whole_word)))
    experiment = experiment_module.Experiment(tiny_tokenizer, {"train": []}, ModelConfig(), TrainingConfig(),
                                              MaskingConfig(), EvaluationConfig(), SequenceConfig())
    experiment.train(None)
    experiment.train(None, masking=MaskingConfig(whole_word=True))  # a trial that searches whole_word
    assert seen == [(False, False), (True, True)]


@pytest.mark.parametrize(("model", "rate"), [
    ({"hidden_size": 256, "num_attention_heads": 4}, 5e-4),  # auto: local at 0.03, half the 2e-3 x 128 / width rule
    ({"hidden_size": 256, "num_attention_heads": 4, "initialisation": "bert"}, 1e-3),
    ({}, 2e-3),  # 128 wide: local at the rule
])
def test_an_experiment_trains_its_model_at_the_rate_of_its_initialisation(tiny_tokenizer, model, rate):
    from bert_mlm.core.train.experiment import Experiment

    experiment = Experiment(tiny_tokenizer, {"train": []}, ModelConfig(**model), TrainingConfig(), MaskingConfig(),
                            EvaluationConfig(), SequenceConfig())
    assert experiment.training.peak_learning_rate(experiment.model_config.hidden_size) == pytest.approx(rate)


def test_validation_runs_on_the_valid_split_with_its_own_budget(tiny_tokenizer):
    from bert_mlm.core.train.experiment import Experiment

    valid = [np.array([2, *range(10, 40), 3], dtype=np.int32)] * 40
    experiment = Experiment(tiny_tokenizer, {"train": valid, "valid": valid}, ModelConfig(), TrainingConfig(),
                            MaskingConfig(), EvaluationConfig(), SequenceConfig())
    assert experiment.validation(TrainingConfig()) is None  # off by default
    scored = experiment.validation(TrainingConfig(eval_every=5, eval_masked_tokens=60))(experiment.new_model())
    assert 60 <= scored.masked_tokens < 300  # one block of 40 sequences x 30 tokens at 15 %, not 8 draws
    experiment.sequences["valid"] = []
    with pytest.raises(UserError, match=r"training\.eval_every: the valid split holds no sequences"):
        experiment.validation(TrainingConfig(eval_every=5))


def patterns(tokenizer, count: int, seed: int = 0) -> list[np.ndarray]:
    """Sequences drawn from four fixed patterns of 40 tokens: a tiny model learns to fill them in."""
    rng = np.random.default_rng(0)
    shapes = [rng.integers(10, 200, size=40) for _ in range(4)]
    order = np.random.default_rng(seed).integers(0, 4, count)
    return [np.array([tokenizer.cls_token_id, *shapes[k], tokenizer.sep_token_id], dtype=np.int32) for k in order]


@pytest.mark.parametrize(("learning_rate", "leaves"), [(5e-3, True), (1e-7, False)])
def test_the_summary_names_when_validation_left_the_unigram_plateau_or_that_it_never_did(tiny_tokenizer,
                                                                                       learning_rate, leaves, caplog):
    from bert_mlm.core.train.experiment import Experiment
    from bert_mlm.core.train.result import TrainingSummary

    training = TrainingConfig(max_steps=60, batch_size=16, learning_rate=learning_rate, warmup_steps=5, eval_every=10,
                              eval_masked_tokens=300, schedule="constant_with_warmup", progress=False)
    experiment = Experiment(tiny_tokenizer, {"train": patterns(tiny_tokenizer, 200, 0),
                                             "valid": patterns(tiny_tokenizer, 40, 1)},
                            ModelConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                        intermediate_size=64, max_position_embeddings=64),
                            training, MaskingConfig(), EvaluationConfig(), SequenceConfig(max_length=64))
    with caplog.at_level(logging.INFO, logger="bert_mlm.core.train.loop"):
        result = experiment.train(experiment.new_model())
    summary = TrainingSummary.of(result, MaskingConfig(), probability_source="parameters", decision="configured",
                                 tuning_run=None,
                                 parameter_count=0, word_segmenter="wordpiece", world_size=1, eval_every=10)
    validated = result.history.dropna(subset=["valid_frequent_share"])
    assert len(validated) == 6 and validated["valid_baseline_accuracy"].between(0.01, 0.1).all()
    # Each validation's log line says live where the model stands: "on" until the step the summary names.
    standing = [re.search(r"validation at step (\d+): .*; (on|off) the unigram plateau", record.getMessage())
                for record in caplog.records if record.getMessage().startswith("validation at step")]
    assert len(standing) == 6 and all(standing)
    first_off = next((int(match[1]) for match in standing if match[2] == "off"), None)
    assert first_off == summary.plateau_left_step
    if leaves:
        assert summary.plateau_left_step in set(validated["step"]) and 0 < summary.plateau_left_seconds
        assert summary.plateau.startswith("off the unigram plateau")
    else:
        assert summary.plateau_left_step is None
        assert summary.plateau.startswith("still on the unigram plateau: it fills masks with the most frequent tokens")
    assert TrainingSummary.from_json(summary.to_json()) == summary  # its keys round-trip


def test_the_plateau_rule_reads_the_reference_and_the_predictions():
    from bert_mlm.core.evaluate.result import off_plateau, plateau_sentence

    assert off_plateau(0.30, 0.05, 0.40) and not off_plateau(0.055, 0.05, 0.40)  # 1.1x the reference: on it
    assert not off_plateau(0.12, 0.05, 0.95)  # 2.4x the reference, every mask filled with ，的。国: still on it
    assert off_plateau(None, 0.05, 0.4) is None
    assert plateau_sentence(0.12, 0.05, 0.95).startswith("still on the unigram plateau")
    assert "(2.40x the reference accuracy, 95% of predictions among the 10 most" in plateau_sentence(0.12, 0.05, 0.95)
