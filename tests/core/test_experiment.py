"""Assembling a run: a tuning trial trains with the collator of its own masking."""

from __future__ import annotations

from bert_mlm.config import MaskingConfig, TrainingConfig


def test_a_trial_trains_with_the_collator_of_its_own_masking(tiny_tokenizer, monkeypatch):
    from bert_mlm.config import EvaluationConfig, ModelConfig, SequenceConfig
    from bert_mlm.core import experiment as experiment_module

    seen = []
    monkeypatch.setattr(experiment_module, "train", lambda model, sequences, ids, masking, training, collator, *rest:
                        seen.append((masking.whole_word, collator.whole_word)))
    experiment = experiment_module.Experiment(tiny_tokenizer, {"train": []}, ModelConfig(), TrainingConfig(),
                                              MaskingConfig(), EvaluationConfig(), SequenceConfig())
    experiment.train(None)
    experiment.train(None, masking=MaskingConfig(whole_word=True))  # a trial that searches whole_word
    assert seen == [(False, False), (True, True)]
