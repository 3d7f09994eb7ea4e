"""The study of continued pretraining (``tuning.objective: continued``): two objectives paired
against the starting model, the Pareto front, the forgetting budget's rule and its confirmation."""

from __future__ import annotations

import math

import numpy as np
import optuna
import pytest
from transformers import BertConfig, BertForMaskedLM

from bert_mlm.config import SECTIONS, MaskingConfig
from bert_mlm.core.data.corpus import RawText
from bert_mlm.core.study.continued import Change, adopted_point, confirm_continued, tune_continued
from bert_mlm.core.study.record import TuningRecord
from bert_mlm.core.study.tuning import trials_table
from bert_mlm.core.train.experiment import Experiment
from tests.core.study.test_tuning import PARAMS, tiny_inputs


def study_of(points: list[tuple[float, float]]) -> optuna.Study:
    """A real in-memory two-objective study holding one finished trial per (domain, general) point."""
    study = optuna.create_study(directions=["minimize", "minimize"])
    for number, values in enumerate(points):
        study.add_trial(optuna.trial.create_trial(params={"probability": 0.1 + number / 100},
                                                  distributions={"probability": optuna.distributions.FloatDistribution(
                                                      0.05, 0.5)}, values=list(values)))
    return study


def test_the_budget_adopts_the_largest_domain_gain_on_the_front_that_forgets_less():
    # (domain loss change, general loss change): trial 3 is dominated by trial 2 (both worse).
    study = study_of([(-0.5, 0.30), (-0.3, 0.04), (-0.2, 0.01), (-0.1, 0.02)])
    assert {trial.number for trial in study.best_trials} == {0, 1, 2}
    assert adopted_point(study, 0.05).number == 1  # the largest gain within 0.05
    assert adopted_point(study, 1.0).number == 0  # a loose budget: the largest gain of all
    assert adopted_point(study, 0.02).number == 2
    assert adopted_point(study, 0.005) is None  # every point forgets more: nothing adopted


def test_the_seeds_mean_carries_the_masks_error_and_the_seeds_spread():
    mean = Change.mean([Change(-0.30, 0.02, 0.05, 0.01), Change(-0.20, 0.04, 0.03, 0.01)])
    assert (mean.domain, mean.general) == pytest.approx((-0.25, 0.04))
    assert mean.domain_se == pytest.approx(math.sqrt(0.03 ** 2 + np.var([-0.3, -0.2], ddof=1) / 2))
    assert mean.general_se > 0.01  # the spread adds to the masks' error
    assert Change.mean([Change(-0.3, 0.02, 0.05, 0.01)]).domain_se == pytest.approx(0.02)


@pytest.mark.parametrize(("configured", "tuned", "adopted"), [
    # a clearly larger domain gain (each seed ~0.1 lower), forgetting within the budget: adopted
    ([(-0.20, 0.02), (-0.21, 0.02), (-0.19, 0.02)], [(-0.30, 0.03), (-0.31, 0.04), (-0.29, 0.03)], True),
    # the same domain gain, but the configured setting breaks the budget and the tuned keeps it: adopted
    ([(-0.30, 0.09), (-0.20, 0.08), (-0.25, 0.10)], [(-0.25, 0.03), (-0.26, 0.02), (-0.24, 0.04)], True),
    # a larger gain that forgets more than the budget: kept the configured setting
    ([(-0.20, 0.02), (-0.21, 0.02), (-0.19, 0.02)], [(-0.40, 0.08), (-0.41, 0.09), (-0.39, 0.07)], False),
    # within the budget, a gain within seed noise: kept the configured setting
    ([(-0.20, 0.02), (-0.30, 0.02), (-0.25, 0.02)], [(-0.26, 0.01), (-0.24, 0.01), (-0.25, 0.01)], False),
])
def test_the_confirmation_weighs_both_objectives(configured, tuned, adopted):
    record = TuningRecord("tuning", {"probability": 0.3}, corpus={"replay_share": 0.25}, objective="continued",
                          best_value=-0.3, best_forgetting=0.03)
    changes = [[Change(domain, 0.01, general, 0.01) for domain, general in pairs] for pairs in (configured, tuned)]
    confirmed = confirm_continued(record, *changes, 0.05, MaskingConfig(probability=0.15))
    assert confirmed.confirmation.adopted is adopted
    assert confirmed.confirmation.tuned_forgetting == [general for _, general in tuned]
    if adopted:
        assert confirmed.chosen["corpus"] == {"replay_share": 0.25} and confirmed.source == "tuning"
    else:
        assert confirmed.source == "parameters" and confirmed.chosen["corpus"] == {}
        assert confirmed.tuned == {"masking": {"probability": 0.3}, "corpus": {"replay_share": 0.25}}
        assert confirmed.decision.startswith("kept the configured setting: domain loss change")
    assert TuningRecord.from_json(confirmed.to_json()) == confirmed  # the file holds it all


def test_a_study_of_continued_pretraining_pairs_each_trial_with_the_starting_model(tmp_path):
    store, index, tokenizer = tiny_inputs(tmp_path)
    start = tmp_path / "start"
    model = PARAMS["model"]
    BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), **model, pad_token_id=tokenizer.pad_token_id)
                    ).save_pretrained(start)
    tokenizer.save_pretrained(start)
    sections = {**PARAMS, "model": {**model, "init_from": str(start)}, "training": {**PARAMS["training"]}}
    typed = {name: SECTIONS[name].build(sections[name]) for name in ("model", "training", "masking", "sequences")}
    experiment = Experiment.from_store(store, index, tokenizer, evaluation=SECTIONS["evaluation"].build(
        PARAMS["evaluation"]).protocol, **typed)
    rng = np.random.default_rng(1)
    general = [RawText("general.txt", " ".join(rng.choice(["omega", "theta", "kappa", "sigma"], size=20)),
                       is_document=True) for _ in range(40)]
    tuning = SECTIONS["tuning"].build({
        "objective": "continued", "n_trials": 3, "trial_steps": 3, "seeds": 2, "forgetting_budget": 10.0,
        "search_space": {"probability": [0.1, 0.4], "learning_rate": [1e-4, 3e-2]},
        "storage": f"sqlite:///{tmp_path}/continued.db"})
    masking, training, record, study = tune_continued(experiment, tuning, general, None, None)
    trials = trials_table(study)
    assert len(study.directions) == 2 and len(trials) == 3
    assert trials["values_0"].tolist() == pytest.approx(trials["attr_domain_change"].tolist())
    assert trials["values_1"].tolist() == pytest.approx(trials["attr_general_change"].tolist())
    assert (trials["attr_domain_change_se"] > 0).all() and (trials["attr_general_change_se"] > 0).all()
    assert trials["values_0"].nunique() == 3  # the trials' rates differ, and so do their changes
    assert set(trials[trials["pareto"]]["number"]) == {trial.number for trial in study.best_trials}
    chosen = trials.loc[trials["pareto"]].sort_values("values_0").iloc[0]  # a budget of 10 holds every point
    confirmation = record.confirmation
    assert len(confirmation.tuned_losses) == len(confirmation.configured_forgetting) == 2
    assert confirmation.tuned_losses == pytest.approx([change["domain"] for change in
                                                       chosen["attr_seed_changes"]])
    if confirmation.adopted:
        assert record.best_trial == chosen["number"] and masking.probability == chosen["params_probability"]
        assert training.learning_rate == pytest.approx(chosen["params_learning_rate"])
    else:
        assert masking == experiment.masking and training is None and record.tuned["masking"]
    # A rerun continues the study: no trial is added, and the same point is chosen.
    again = tune_continued(experiment, tuning, general, None, None)
    assert len(again[3].trials) == 3 and again[2] == record
