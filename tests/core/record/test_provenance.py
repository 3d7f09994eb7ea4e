"""Which model and run every section of a report belongs to, and the report's opening record."""

from __future__ import annotations

import re

from bert_mlm.core.finetune.result import FinetuneResults
from bert_mlm.core.record.provenance import FINETUNE, OPENING, TUNING, provenance
from bert_mlm.core.record.report import run_report
from bert_mlm.core.record.results import ModelResults
from bert_mlm.core.record.run_record import RunRecord
from bert_mlm.core.study.record import TuningRecord
from tests.core.record.test_report import history, metrics

A, B, C = "2026-01-01T00.00.00.000Z", "2026-01-02T00.00.00.000Z", "2026-01-03T00.00.00.000Z"


def record(run: str, **extra) -> RunRecord:
    return RunRecord.from_json({"run_id": run, "started": run, "env": "smoke", "params": {"training": {"max_steps": 3}},
            "pipelines": ["__default__"], "trained_model": run, "command": "kedro run --env smoke",
            "corpus": {"source": "built-in corpus", "language": "en", "documents_version": run,
                       "token_store": {"version": run, "digests": {"train": "abc"}}},
            "sections": {"masking": {"probability": 0.15}}, "code": {"version": "0.1", "git": None},
            "software": {"torch": "2.13"}, "device": "cpu", **extra})


def model_metrics(**extra) -> ModelResults:
    return ModelResults.from_json({**metrics(), "model_version": B, "evaluated_in_run": B, "tuning_run": B, **extra})


def finetuned(model: str, run: str) -> FinetuneResults:
    return FinetuneResults.from_json({"finetune_summary": "gained", "finetune_model_version": model}, run)


def test_a_later_study_and_an_earlier_models_fine_tuning_are_named_as_not_this_models():
    study = TuningRecord("tuning", {"probability": 0.355}, finished_trials=2, version=C)
    found = provenance(model_metrics(mask_probability=0.15), record(C, trained_model=None), record(B), study=study,
                       finetune=finetuned(A, A), data_runs={"corpus": B, "tokenization": B, "sequences": B},
                       history_run=B)
    assert found.warnings[TUNING].startswith("this mask-rate study (adopted 0.355) was run for another model than "
                                             "the one reported (trained at 0.15")
    assert f"was made for model {A}" in found.warnings[FINETUNE]
    assert set(found.warnings) == {TUNING, FINETUNE}  # the data and the curves are the model's own
    page = run_report(model_metrics(), history(), provenance=found)
    headings = re.findall(r"<h2>(.*?)</h2>", page)
    assert headings[0] == OPENING
    # Every section says which model it belongs to, right under its heading.
    for heading in headings[1:]:
        following = page.split(f"<h2>{heading}</h2>", 1)[1]
        assert following.startswith('<p class="belongs">'), heading
        assert B in following.split("</p>", 1)[0] or heading == "Tuning of the mask probability", heading
    assert f"this report was made by run {C}" in page and "<b>Not this model's:</b>" in page


def test_the_models_own_study_and_fine_tuning_get_no_warning():
    study = TuningRecord("tuning", {"probability": 0.2}, version=B)
    results = model_metrics(finetuned_in_run=C, finetune_summary="gained", finetune_model_version=B)
    found = provenance(results, record(C), record(B), study=study, finetune=finetuned(B, C),
                       data_runs={"corpus": B, "tokenization": B}, history_run=B)
    assert found.warnings == {}
    assert found.captions[TUNING].endswith(f"Model {B} was trained with it.")
    assert found.captions[FINETUNE] == f"Model {B}, fine-tuned in run {C}."


def test_data_made_after_the_model_and_a_model_without_record():
    found = provenance(model_metrics(), record(C), None, data_runs={"corpus": C, "tokenization": C})
    assert "No record of the run that trained model" in found.opening()
    trained = provenance(model_metrics(), record(C), record(B), data_runs={"corpus": C, "tokenization": C})
    assert trained.warnings["Corpus"].startswith(f"model {B} was trained on the data of run {B}")
