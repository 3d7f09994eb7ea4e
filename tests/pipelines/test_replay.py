"""Replay of general text during continued pretraining (``corpus.replay``): drawn at sample time beside
the domain with the mixture machinery, read for its train split only, kept apart from the general text
scored for forgetting, stated in the record, and a changed share re-runs no data stage."""

from __future__ import annotations

import io
import json
import logging

import pytest
import yaml
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project

from bert_mlm.core.data.corpus import RawText, clean_batch
from tests.kedro_runs import latest


def test_a_train_only_source_keeps_its_train_split_and_leaves_the_held_out_side_out():
    items = [RawText("general.txt", f"general sentence number {k} with enough words in it", is_document=True,
                     origin="replay") for k in range(400)]
    items += [RawText("domain.txt", f"domain sentence number {k} with enough words in it", is_document=True,
                      origin="domain") for k in range(400)]
    ratios = {"train": 0.8, "valid": 0.1, "test": 0.1}
    everything = clean_batch(items, 1, 1000, ratios)
    kept = clean_batch(items, 1, 1000, ratios, train_only=("replay",))
    origins = {origin: [split for o, split in zip(kept.origins, kept.splits, strict=True) if o == origin]
               for origin in ("replay", "domain")}
    assert set(origins["replay"]) == {0} and 280 < len(origins["replay"]) < 360  # its train side only
    assert set(origins["domain"]) == {0, 1, 2} and len(origins["domain"]) == 400  # the domain's splits as they were
    replay_train = {t for t, o, s in zip(everything.texts, everything.origins, everything.splits, strict=True)
                    if o == "replay" and s == 0}
    assert {t for t, o in zip(kept.texts, kept.origins, strict=True) if o == "replay"} == replay_train


def _run(project, monkeypatch, share: float, general, domain) -> str:
    """The chain to the evaluation, with corpus.replay at ``share`` and the general text also the
    evaluation's corpus; the log."""
    (project / "conf" / "smoke" / "parameters_corpus.yml").write_text(yaml.safe_dump({"corpus": {
        "path": str(domain), "text_column": "review", "replay": {"path": str(general), "share": share}}}))
    monkeypatch.chdir(project)
    bootstrap_project(project)
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    logging.getLogger().addHandler(handler)
    try:
        runtime = {"tuning": {"n_trials": 0}, "training": {"max_steps": 2, "checkpoint_every": 0},
                   "evaluation": {"corpus_path": str(general)}}
        with KedroSession.create(project_path=project, env="smoke", runtime_params=runtime) as session:
            session.run(pipeline_names=["ingestion", "tokenization", "sequences", "tuning", "training", "evaluation"])
    finally:
        logging.getLogger().removeHandler(handler)
    return log.getvalue()


@pytest.mark.slow
def test_replay_draws_its_share_and_a_changed_share_reruns_no_data_stage(project_copy, monkeypatch, shared_data,
                                                                        reviews):
    general = project_copy / "news.txt"  # Chinese news, one sentence a line: the general text
    general.write_text("\n".join((shared_data / "corpora" / "msra-ner" / "news.txt").read_text(
        encoding="utf-8").splitlines()[:3000]) + "\n", encoding="utf-8")
    domain = reviews  # 2,000 hotel reviews: the shares and the reuse are the subject, not volume
    log = _run(project_copy, monkeypatch, 0.2, general, domain)
    data = project_copy / "data"
    summary = json.loads(latest(data / "07_model_output" / "training_summary.json").read_text())
    epoch = sum(source["epoch_sequences"] for source in summary["mixture"].values())
    assert abs(summary["mixture"]["replay"]["epoch_sequences"] - 0.2 * epoch) < 1  # counted on the drawn epoch
    assert "scored on its held-out side only" in log  # the general text scored for forgetting is not replayed
    record = json.loads(latest(data / "08_reporting" / "run_config.json").read_text())
    replay = next(source for source in record["corpus"]["sources"] if source["name"] == "replay")
    assert replay["weight"] == pytest.approx(0.2) and record["sections"]["corpus"]["replay"]["share"] == 0.2
    log = _run(project_copy, monkeypatch, 0.5, general, domain)
    reused = {line.split(":")[0] for line in log.splitlines() if "reused it (hard links)" in line}
    assert reused == {"corpus_documents", "tokenizer", "token_store", "sequence_index"}
    summary = json.loads(latest(data / "07_model_output" / "training_summary.json").read_text())
    epoch = sum(source["epoch_sequences"] for source in summary["mixture"].values())
    assert abs(summary["mixture"]["replay"]["epoch_sequences"] - 0.5 * epoch) < 1


@pytest.mark.slow
def test_a_study_of_continued_pretraining_searches_the_replay_share_and_training_draws_it(
        project_copy, monkeypatch, shared_data, reviews, tiny_chinese_bert):
    """`tuning.objective: continued` with `replay_share` searched: each trial draws its own share of
    general text, is scored on the domain and on the general text's held-out side against the
    starting model, the study keeps the Pareto front, and the training stage draws the adopted share."""
    general = project_copy / "news.txt"
    general.write_text("\n".join((shared_data / "corpora" / "msra-ner" / "news.txt").read_text(
        encoding="utf-8").splitlines()[:2000]) + "\n", encoding="utf-8")
    (project_copy / "conf" / "smoke" / "parameters_corpus.yml").write_text(yaml.safe_dump({"corpus": {
        "path": str(reviews), "text_column": "review", "replay": {"path": str(general), "share": 0.2}}}))
    monkeypatch.chdir(project_copy)
    bootstrap_project(project_copy)
    runtime = {"model": {"init_from": str(tiny_chinese_bert)}, "evaluation": {"corpus_path": str(general)},
               "training": {"max_steps": 2, "checkpoint_every": 0},
               "tuning": {"objective": "continued", "n_trials": 3, "trial_steps": 2, "seeds": 1, "adopt": "always",
                          "forgetting_budget": 10.0, "eval_max_sequences": 64,
                          "search_space": {"replay_share": [0, 0.6]}}}
    with KedroSession.create(project_path=project_copy, env="smoke", runtime_params=runtime) as session:
        session.run(pipeline_names=["ingestion", "tokenization", "sequences", "tuning", "training"])
    data = project_copy / "data"
    record = json.loads(latest(data / "07_model_output" / "tuning_best_params.json").read_text())
    share = record["corpus"]["replay_share"]
    assert record["source"] == "tuning" and record["objective"] == "continued" and 0 <= share <= 0.6
    assert {"best_domain_loss_change", "best_forgetting"} <= set(record)
    import pandas as pd

    trials = pd.read_csv(latest(data / "07_model_output" / "tuning_trials.csv"))
    assert trials["params_replay_share"].nunique() == 3 and trials["pareto"].any()
    best = trials.set_index("number").loc[record["best_trial"]]
    assert best["params_replay_share"] == pytest.approx(share) and best["pareto"]
    assert best["values_0"] == pytest.approx(record["best_domain_loss_change"])
    summary = json.loads(latest(data / "07_model_output" / "training_summary.json").read_text())
    epoch = sum(source["epoch_sequences"] for source in summary["mixture"].values())
    assert abs(summary["mixture"]["replay"]["epoch_sequences"] - share * epoch) < 1  # the adopted share, drawn
    # The run record (and so the card and the report) states the share training drew, taken from the study.
    run = json.loads(latest(data / "08_reporting" / "run_config.json").read_text())
    replay = next(source for source in run["corpus"]["sources"] if source["name"] == "replay")
    assert replay["weight"] == pytest.approx(share) and "corpus" in run["sections_from_tuning"]
    assert run["sections"]["corpus"]["replay"]["share"] == pytest.approx(share)
