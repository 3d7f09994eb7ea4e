"""The tuning stage's record: the study's facts and where a run's masking comes from; the files
of earlier versions load as they are; saved sections that disagree with the parameters are refused."""

from __future__ import annotations

import pytest

from bert_mlm.config import MaskingConfig, TrainingConfig, VariantOverrides
from bert_mlm.core.study.record import Confirmation, TuningRecord, check_saved_sections
from bert_mlm.errors import UserError

# Files as earlier versions wrote them: an adopted study, a kept configuration, a skipped study.
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
def test_stored_records_load_and_save_as_the_same_file(stored):
    record = TuningRecord.from_json(stored)
    assert record.to_json() == stored
    assert TuningRecord.from_json(record.to_json()) == record


def test_the_summary_says_where_the_probability_came_from():
    adopted, kept = TuningRecord.from_json(ADOPTED), TuningRecord.from_json(KEPT)
    assert (adopted.probability_source, adopted.decision) == ("tuning", "lowers the eval loss")
    # A kept configuration carries the configured probability, chosen by nobody.
    assert (kept.probability_source, kept.decision) == ("parameters", "within seed noise")
    assert kept.chosen == {"masking": {}, "training": {}, "corpus": {}}
    variant = TuningRecord.of_variant(VariantOverrides(masking={"whole_word": True}))
    assert variant.probability_source == "parameters"  # the variant left the probability alone
    assert TuningRecord.of_variant(VariantOverrides(masking={"probability": 0.3})).probability_source == "variant"


def test_a_bad_source_is_refused_by_name():
    with pytest.raises(UserError, match=r"tuning_best_params: source 'guess' is not one of"):
        TuningRecord.from_json({"source": "guess"})


def test_the_confirmation_keeps_the_configured_masking_unless_it_adopts():
    best = TuningRecord("tuning", {"probability": 0.31}, best_trial=2, best_value=4.2, objective="finetune")
    assert best.score == {"best_finetune_score": pytest.approx(1 - 4.2)}
    kept = best.confirmed(Confirmation(adopted=False, reason="within seed noise"), MaskingConfig(probability=0.15))
    assert (kept.source, kept.masking, kept.tuned, kept.decision) == (
        "parameters", {"probability": 0.15}, {"masking": {"probability": 0.31}}, "within seed noise")
    adopted = best.confirmed(Confirmation(adopted=True, reason="clear"), MaskingConfig())
    assert adopted.source == "tuning" and adopted.chosen["masking"] == {"probability": 0.31}
    assert TuningRecord.of_parameters(MaskingConfig(probability=0.2)).to_json() == SKIPPED


def test_only_adopted_values_the_user_set_are_warned_about():
    tuned = TuningRecord("tuning", {"probability": 0.31})
    assert tuned.set_aside({"masking": {"probability": 0.3}}) == [
        "masking.probability: your --params value 0.3 is set aside for 0.31 (from tuning); to train with yours, set "
        "--params tuning.n_trials=0 with the tuning stage in the run (it then passes your values on)"]
    assert tuned.set_aside({"masking": {"probability": 0.31}}) == []
    assert TuningRecord.from_json(KEPT).set_aside({"masking": {"probability": 0.3}}) == []


def test_saved_sections_must_agree_with_the_parameters_except_where_the_study_chose():
    adopted = TuningRecord.from_json(ADOPTED)
    saved = {"masking": MaskingConfig(probability=0.31), "training": {}}
    configured = {"masking": MaskingConfig(), "training": TrainingConfig(max_steps=3)}
    check_saved_sections(adopted, saved, configured)  # the probability is the study's; no training section saved
    with pytest.raises(UserError, match=r"^masking\.whole_word: this run's parameters say True, but the training "
                                        r"stage takes its masking from resolved_masking, which the tuning stage saved "
                                        r"with False; add the tuning stage to the run"):
        check_saved_sections(adopted, saved, {**configured, "masking": MaskingConfig(whole_word=True)})
    # Without an adopted study every value must agree, the probability too.
    with pytest.raises(UserError, match=r"^masking\.probability: this run's parameters say 0\.15"):
        check_saved_sections(TuningRecord.from_json(KEPT), saved, configured)
    tuned_rate = TuningRecord("tuning", {"probability": 0.31}, {"learning_rate": 1e-3})
    saved_training = {**saved, "training": TrainingConfig(learning_rate=1e-3)}
    check_saved_sections(tuned_rate, saved_training, {**configured, "training": TrainingConfig()})
    with pytest.raises(UserError, match=r"^training\.max_steps: this run's parameters say 3"):
        check_saved_sections(tuned_rate, saved_training, configured)
