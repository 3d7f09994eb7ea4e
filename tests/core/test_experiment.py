"""The typed origin of a run's masking: parameters, an adopted tuning result, or a variant."""

from __future__ import annotations

import pytest

from bert_mlm.core.errors import UserError
from bert_mlm.core.experiment import Origin, Overrides
from bert_mlm.core.masking import MaskingConfig
from bert_mlm.core.training_config import TrainingConfig


def test_a_tuning_result_overrides_masking_and_training_and_says_so():
    overrides = Overrides.from_json({"masking": {"probability": 0.3}, "training": {"learning_rate": 1e-3},
                                     "source": "tuning", "confirmation": {"reason": "clear of seed noise"}})
    masking, training = overrides.apply(MaskingConfig(), TrainingConfig())
    assert (masking.probability, training.learning_rate) == (0.3, 1e-3)
    assert overrides.origin is Origin.TUNING and overrides.probability_origin is Origin.TUNING
    assert overrides.decision == "clear of seed noise"


def test_a_kept_configuration_applies_nothing_even_when_it_carries_values():
    # The tuning node's "kept the configured masking" result carries the configured probability.
    overrides = Overrides.from_json({"masking": {"probability": 0.9}, "source": "parameters",
                                     "confirmation": {"reason": "within seed noise"}})
    masking, training = overrides.apply(MaskingConfig(probability=0.15), TrainingConfig())
    assert masking == MaskingConfig(probability=0.15) and training == TrainingConfig()
    assert overrides.probability_origin is Origin.PARAMETERS and overrides.decision == "within seed noise"


def test_a_variant_without_a_probability_leaves_the_probability_to_the_parameters():
    overrides = Overrides.from_json(Overrides(Origin.VARIANT, {"whole_word": True}).to_json())
    masking, _ = overrides.apply(MaskingConfig(), TrainingConfig())
    assert masking.whole_word and overrides.probability_origin is Origin.PARAMETERS


def test_bad_values_are_refused_by_name():
    with pytest.raises(UserError, match=r"tuning_best_params: source 'guess' is not one of"):
        Overrides.from_json({"source": "guess"})
    with pytest.raises(ValueError, match=r"masking\.probability"):
        Overrides.from_json({"masking": {"probability": 1.5}, "source": "variant"}).apply(MaskingConfig(), TrainingConfig())
