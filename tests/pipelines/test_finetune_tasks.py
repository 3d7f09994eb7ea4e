"""Kedro sessions that judge a model by the tasks teams fine-tune for, on real Chinese data (slices of
MSRA news, its NER sentences and ChnSentiCorp reviews): named entities and sentiment in one run,
the study judged by entity F1, a later run on another file added to the model's card, and the
one-line refusals of a bad tagged file before any model trains."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from huggingface_hub import ModelCard as HubCard
from kedro.io.core import Version

from bert_mlm.datasets.pretrained import ClassifierDataset
from tests.kedro_runs import latest, run_session

SMALL = {"finetune.max_train_examples": 120, "finetune.max_eval_examples": 60, "finetune.seeds": 2,
         "finetune.epochs": 2, "finetune.max_length": 32, "finetune.progress": False}


@pytest.fixture
def chinese(shared_data, tmp_path) -> dict[str, Path]:
    """News to pretrain on, 400 reviews (sentiment) and 500 tagged MSRA sentences (entities), as files."""
    news = (shared_data / "corpora" / "msra-ner" / "news.txt").read_text(encoding="utf-8").splitlines()
    corpus = tmp_path / "新闻.txt"
    corpus.write_text("\n\n".join(news[30000:31500]), encoding="utf-8")  # a blank line between sentences
    reviews = pd.read_csv(shared_data / "corpora" / "chnsenticorp" / "ChnSentiCorp_htl_all.csv").dropna()
    sentiment = tmp_path / "评论.csv"
    reviews.groupby("label").head(200).to_csv(sentiment, index=False)  # the file is sorted by label
    sentences = (shared_data / "corpora" / "msra-ner" / "ner_train.conll").read_text(encoding="utf-8").split("\n\n")
    entities = tmp_path / "msra.conll"
    entities.write_text("\n\n".join(sentences[:500]) + "\n", encoding="utf-8")
    return {"corpus": corpus, "sentiment": sentiment, "entities": entities}


@pytest.mark.slow
def test_sentiment_and_entities_judge_one_model_and_its_card_keeps_each_task(project_copy, monkeypatch, chinese):
    """Two tasks in one run (`finetune.tasks`): a paired gain each in metrics.json, the report and the card, the
    runs table with a task column, a label mapping per task, and the mask-rate study judged by the NER task's
    entity F1 (`tuning.finetune_task`). Then `--pipelines finetune` on one tagged file (`finetune.train_path`
    alone): its keys are the single task's, its runs table has a column per entity type, the kept tagger loads
    as a token classifier, and the card keeps the first run's two tasks beside it."""
    run_session(project_copy, monkeypatch, **{
        "corpus.path": str(chinese["corpus"]), "tokenizer.vocab_size": 3000, "tuning.n_trials": 1,
        "tuning.objective": "finetune", "tuning.finetune_task": "ner",
        "finetune.tasks.sentiment.train_path": str(chinese["sentiment"]),
        "finetune.tasks.sentiment.text_column": "review", "finetune.tasks.ner.train_path": str(chinese["entities"]),
        **SMALL})
    data = project_copy / "data"
    metrics = json.loads(latest(data / "08_reporting" / "metrics.json").read_text(encoding="utf-8"))
    assert (metrics["finetune_task"], metrics["finetune_kind"], metrics["finetune_metric"]) == (
        "sentiment", "sequence", "accuracy")
    ner = metrics["finetune_tasks"]["ner"]
    assert (ner["task"], ner["kind"], ner["metric"], ner["dataset"]) == ("ner", "token", "entity_f1", "msra.conll")
    for task in (ner, {key.removeprefix("finetune_"): value for key, value in metrics.items()}):
        assert task["gain_ci_low"] <= task["gain"] <= task["gain_ci_high"] and "points [95 % CI" in task["summary"]
    assert ner["summary"].startswith("fine-tuned entity F1 ") and set(ner["gold_entities"]) == {"LOC", "ORG", "PER"}
    best = json.loads(latest(data / "07_model_output" / "tuning_best_params.json").read_text())
    trials = pd.read_csv(latest(data / "07_model_output" / "tuning_trials.csv"))
    scores = json.loads(trials["attr_finetune_score"].iloc[0].replace("'", '"'))
    assert best["objective"] == "finetune" and best["best_finetune_score"] == pytest.approx(sum(scores) / len(scores))
    runs = pd.read_csv(latest(data / "08_reporting" / "finetune_runs.csv"))
    assert set(runs["task"]) == {"sentiment", "ner"} and runs.groupby("task")["model"].nunique().eq(2).all()
    assert runs.loc[runs["task"] == "ner", "eval_score"].equals(runs.loc[runs["task"] == "ner", "eval_entity_f1"])
    mapping = json.loads(latest(data / "06_models" / "finetune_label_mapping.json").read_text(encoding="utf-8"))
    assert set(mapping) == {"sentiment", "ner"} and "B-PER" in mapping["ner"]["label_to_id"]
    report = latest(data / "08_reporting" / "run_report.html").read_text(encoding="utf-8")
    assert "<h3>sentiment</h3>" in report and "<h3>ner</h3>" in report and "entity F1 points [95 % CI" in report
    card = (latest(data / "06_models" / "masked_lm") / "README.md").read_text(encoding="utf-8")
    assert "On `评论.csv` (sentiment): fine-tuned accuracy" in card and "On `msra.conll` (ner): fine-tuned entity F1" \
        in card

    run_session(project_copy, monkeypatch, pipeline_name="finetune", **{
        "finetune.train_path": str(chinese["entities"]), "finetune.save_model": True, **SMALL})
    alone = json.loads(latest(data / "08_reporting" / "finetune_metrics.json").read_text(encoding="utf-8"))
    assert (alone["finetune_task"], alone["finetune_kind"]) == ("", "token") and "finetune_tasks" not in alone
    assert alone["finetune_entity_f1"] == pytest.approx(sum(alone["finetune_seed_entity_f1"]) / 2)
    runs = pd.read_csv(latest(data / "08_reporting" / "finetune_runs.csv"))
    assert {"eval_f1_LOC", "eval_f1_ORG", "eval_f1_PER", "eval_entity_precision"} <= set(runs.columns)
    (tagger,) = ClassifierDataset(str(data / "06_models" / "finetuned_classifier"),
                                  version=Version(None, None)).load().models.values()
    assert type(tagger).__name__ == "BertForTokenClassification" and tagger.config.id2label[0] == "O"
    # The model's newest result of each task: this run's, then the first run's two (run by run).
    metrics = json.loads(latest(data / "08_reporting" / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["finetune_summary"] == alone["finetune_summary"] and set(metrics["finetune_tasks"]) == {
        "sentiment", "ner"}
    card = HubCard((latest(data / "06_models" / "masked_lm") / "README.md").read_text(encoding="utf-8")).text
    lines = [line for line in card.splitlines() if line.startswith("On `")]
    assert [line.split(":")[0] for line in lines] == ["On `msra.conll`", "On `评论.csv` (sentiment)",
                                                      "On `msra.conll` (ner)"]


@pytest.mark.parametrize(("content", "message"), [
    ("王\tB-PER\n英\n", r"^finetune\.train_path: '.*bad\.conll' line 2: '英' has no tag column"),
    ("王\tX-PER\n英\tO\n", r"^finetune\.train_path: '.*bad\.conll' line 1: the tag 'X-PER' is not "),
])
def test_a_bad_tagged_file_is_one_line_before_any_work(project_copy, monkeypatch, tmp_path, content, message):
    bad = tmp_path / "bad.conll"
    bad.write_text(content * 20, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        run_session(project_copy, monkeypatch, **{"finetune.train_path": str(bad)})
    assert not any((project_copy / "data").rglob("*.parquet")), "nothing may be written"


def test_eval_entities_training_never_saw_are_refused_before_any_work(project_copy, monkeypatch, tmp_path):
    train, evaluation = tmp_path / "train.conll", tmp_path / "eval.conll"
    train.write_text("王\tB-PER\n英\tI-PER\n在\tO\n\n" * 10, encoding="utf-8")
    evaluation.write_text("在\tO\nParis\tB-LOC\n\n" * 5, encoding="utf-8")
    with pytest.raises(ValueError, match=r"^finetune\.tasks\.ner: finetune\.eval_path: 1 eval entity type\(s\) never "
                                         r"occur among the training sentences \('LOC'\)"):
        run_session(project_copy, monkeypatch, **{"finetune.tasks.ner.train_path": str(train),
                                                   "finetune.tasks.ner.eval_path": str(evaluation)})
    assert not any((project_copy / "data").rglob("*.parquet")), "nothing may be written"
