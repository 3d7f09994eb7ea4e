"""Assembling a run: a tuning trial trains with the collator of its own masking; validation
during training runs on the valid split with its own budget."""

from __future__ import annotations

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


def test_validation_runs_on_the_valid_split_with_its_own_budget(tiny_tokenizer):
    from bert_mlm.core.train.experiment import Experiment

    valid = [np.array([2, *range(10, 40), 3], dtype=np.int32)] * 40
    experiment = Experiment(tiny_tokenizer, {"train": valid, "valid": valid}, ModelConfig(), TrainingConfig(),
                            MaskingConfig(), EvaluationConfig(), SequenceConfig())
    assert experiment.validation(TrainingConfig()) is None  # off by default
    scored = experiment.validation(TrainingConfig(eval_every=5, eval_masked_tokens=60))(experiment.new_model())
    assert 60 <= scored["eval_masked_tokens"] < 300  # one block of 40 sequences x 30 tokens at 15 %, not 8 draws
    experiment.sequences["valid"] = []
    with pytest.raises(UserError, match=r"training\.eval_every: the valid split holds no sequences"):
        experiment.validation(TrainingConfig(eval_every=5))
