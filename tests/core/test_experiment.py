"""The typed origin of a run's masking: parameters, an adopted tuning result, or a variant."""

from __future__ import annotations

import pytest

from bert_mlm.core.errors import UserError
from bert_mlm.core.masking import MaskingConfig
from bert_mlm.core.training_config import TrainingConfig
from bert_mlm.core.tuning_result import Confirmation, Origin, TuningResult


def test_a_tuning_result_overrides_masking_and_training_and_says_so():
    overrides = TuningResult.from_json({"masking": {"probability": 0.3}, "training": {"learning_rate": 1e-3},
                                     "source": "tuning", "confirmation": {"reason": "clear of seed noise"}})
    masking, training = overrides.apply(MaskingConfig(), TrainingConfig())
    assert (masking.probability, training.learning_rate) == (0.3, 1e-3)
    assert overrides.origin is Origin.TUNING and overrides.probability_origin is Origin.TUNING
    assert overrides.decision == "clear of seed noise"


def test_a_kept_configuration_applies_nothing_even_when_it_carries_values():
    # The tuning node's "kept the configured masking" result carries the configured probability.
    overrides = TuningResult.from_json({"masking": {"probability": 0.9}, "source": "parameters",
                                     "confirmation": {"reason": "within seed noise"}})
    masking, training = overrides.apply(MaskingConfig(probability=0.15), TrainingConfig())
    assert masking == MaskingConfig(probability=0.15) and training == TrainingConfig()
    assert overrides.probability_origin is Origin.PARAMETERS and overrides.decision == "within seed noise"


def test_a_variant_without_a_probability_leaves_the_probability_to_the_parameters():
    overrides = TuningResult.from_json(TuningResult(Origin.VARIANT, {"whole_word": True}).to_json())
    masking, _ = overrides.apply(MaskingConfig(), TrainingConfig())
    assert masking.whole_word and overrides.probability_origin is Origin.PARAMETERS


def test_bad_values_are_refused_by_name():
    with pytest.raises(UserError, match=r"tuning_best_params: source 'guess' is not one of"):
        TuningResult.from_json({"source": "guess"})
    with pytest.raises(ValueError, match=r"masking\.probability"):
        stored = TuningResult.from_json({"masking": {"probability": 1.5}, "source": "variant"})
        stored.apply(MaskingConfig(), TrainingConfig())


# Files as the untyped mapping wrote them: an adopted study, a kept configuration, a skipped study.
ADOPTED = {"masking": {"probability": 0.31}, "source": "tuning", "study_name": "mask-probability-ab12",
           "storage": "sqlite:///data/optuna.db", "objective": "eval_loss", "best_trial": 2, "best_value": 4.2,
           "best_eval_loss": 4.2, "finished_trials": 3,
           "confirmation": {"tuned_losses": [4.1, 4.3], "configured_losses": [4.4, 4.5], "configured_probability": 0.15,
                            "difference": 0.25, "ci_low": 0.1, "ci_high": 0.4, "adopted": True,
                            "reason": "lowers the eval loss"}}
KEPT = {"masking": {"probability": 0.15}, "source": "parameters", "tuned": {"masking": {"probability": 0.31}},
        "confirmation": {**ADOPTED["confirmation"], "adopted": False, "reason": "within seed noise"},
        **{k: ADOPTED[k] for k in ("study_name", "storage", "objective", "best_trial", "best_value", "best_eval_loss",
                                   "finished_trials")}}
SKIPPED = {"masking": {"probability": 0.2}, "source": "parameters"}


@pytest.mark.parametrize("stored", [ADOPTED, KEPT, SKIPPED], ids=["adopted", "kept", "skipped"])
def test_stored_results_load_and_save_as_the_same_file(stored):
    result = TuningResult.from_json(stored)
    assert result.to_json() == stored
    assert TuningResult.from_json(result.to_json()) == result


def test_the_confirmation_keeps_the_configured_masking_unless_it_adopts():
    best = TuningResult(Origin.TUNING, {"probability": 0.31}, best_trial=2, best_value=4.2, objective="finetune")
    assert best.score == {"best_finetune_accuracy": pytest.approx(1 - 4.2)}
    noise = Confirmation(adopted=False, reason="within seed noise")
    kept = best.confirmed(noise, MaskingConfig(probability=0.15))
    assert (kept.origin, kept.masking, kept.tuned, kept.decision) == (
        Origin.PARAMETERS, {"probability": 0.15}, {"masking": {"probability": 0.31}}, "within seed noise")
    assert kept.apply(MaskingConfig(probability=0.2), TrainingConfig())[0].probability == 0.2
    adopted = best.confirmed(Confirmation(adopted=True, reason="clear"), MaskingConfig())
    assert adopted.origin is Origin.TUNING and adopted.masking == {"probability": 0.31} and adopted.decision == "clear"
    assert TuningResult.of_parameters(MaskingConfig(probability=0.2)).to_json() == SKIPPED


def test_only_applied_values_the_user_set_are_warned_about():
    tuned = TuningResult(Origin.TUNING, {"probability": 0.31})
    assert tuned.set_aside({"masking": {"probability": 0.3}}) == [
        "masking.probability: your --params value 0.3 is set aside for 0.31 (from tuning); to train with yours, set "
        "--params tuning.n_trials=0 with the tuning stage in the run (it then passes your values on)"]
    assert tuned.set_aside({"masking": {"probability": 0.31}}) == []
    assert TuningResult.from_json(KEPT).set_aside({"masking": {"probability": 0.3}}) == []
    variant = TuningResult.for_variant({"training": {"learning_rate": 1e-3}})
    assert variant.set_aside({"training": {"learning_rate": 2e-3}})[0].endswith(
        "(from variant); to train with yours, set the value in the variant's overrides in conf/")


def test_a_trial_trains_with_the_collator_of_its_own_masking(tiny_tokenizer, monkeypatch):
    from bert_mlm.core import experiment as experiment_module
    from bert_mlm.core.evaluation import EvaluationConfig
    from bert_mlm.core.model import ModelConfig
    from bert_mlm.core.sequences import SequenceConfig

    seen = []
    monkeypatch.setattr(experiment_module, "train", lambda model, sequences, ids, masking, training, collator, *rest:
                        seen.append((masking.whole_word, collator.whole_word)))
    experiment = experiment_module.Experiment(tiny_tokenizer, {"train": []}, ModelConfig(), TrainingConfig(),
                                              MaskingConfig(), EvaluationConfig(), SequenceConfig())
    experiment.train(None)
    experiment.train(None, masking=MaskingConfig(whole_word=True))  # a trial that searches whole_word
    assert seen == [(False, False), (True, True)]


def test_validation_runs_on_the_valid_split_with_its_own_budget(tiny_tokenizer):
    import numpy as np

    from bert_mlm.core.evaluation import EvaluationConfig
    from bert_mlm.core.experiment import Experiment
    from bert_mlm.core.model import ModelConfig
    from bert_mlm.core.sequences import SequenceConfig

    valid = [np.array([2, *range(10, 40), 3], dtype=np.int32)] * 40
    experiment = Experiment(tiny_tokenizer, {"train": valid, "valid": valid}, ModelConfig(), TrainingConfig(),
                            MaskingConfig(), EvaluationConfig(), SequenceConfig())
    assert experiment.validation(TrainingConfig()) is None  # off by default
    scored = experiment.validation(TrainingConfig(eval_every=5, eval_masked_tokens=60)).evaluate(experiment.new_model())
    assert 60 <= scored["eval_masked_tokens"] < 300  # one block of 40 sequences x 30 tokens at 15 %, not 8 draws
    experiment.sequences["valid"] = []
    with pytest.raises(UserError, match=r"training\.eval_every: the valid split holds no sequences"):
        experiment.validation(TrainingConfig(eval_every=5))
