"""The run record: the facts of a run, the corpus's language, the command line, the code's version."""

from __future__ import annotations

import subprocess
from dataclasses import replace

import pytest

from bert_mlm.core.record.run_record import (
    DataRecord,
    RunRecord,
    corpus_language,
    git_commit,
    hub_datasets,
    run_facts,
    run_record,
)

SECRET = "Sesame-Record-9"


def test_the_corpus_language_comes_from_its_script(shared_data):
    news = (shared_data / "corpora" / "msra-ner" / "news.txt").read_text(encoding="utf-8")[:20_000]
    book = (shared_data / "corpora" / "gutenberg" / "austen-persuasion.txt").read_text(encoding="utf-8")[:20_000]
    assert corpus_language([news]) == "zh"
    assert corpus_language([book]) == "en"
    assert corpus_language(["日本語の文章です。ひらがなとカタカナが多い。"]) == "ja"
    assert corpus_language(["한국어 문장입니다"]) == "ko"
    assert corpus_language(["Это русский текст без латиницы"]) is None  # unknown: the card says so
    assert corpus_language(["1234 !!"]) is None


def test_git_commit_is_none_outside_a_checkout_and_never_fails(tmp_path, monkeypatch):
    assert git_commit(tmp_path) is None
    monkeypatch.setenv("PATH", str(tmp_path))  # no git at all
    assert git_commit() is None


def test_git_commit_of_a_checkout(tmp_path):
    try:
        subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q",
                        "--allow-empty", "-m", "x"], check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("no git here")
    found = git_commit(tmp_path)
    assert len(found["commit"]) == 40 and found["dirty"] is False


def facts(**params) -> RunRecord:
    run = {"run_id": "2026-01-01T00.00.00.000Z", "env": "smoke", "runtime_params": params,
           "pipeline_names": ["finetune"], "tags": ["reporting"]}
    sections = {"masking": {"probability": 0.15}, "training": {"max_steps": 10},
                "corpus": {"path": f"http://reader:{SECRET}@host/c.txt", "hf_dataset": None, "sources": None},
                "model": {"init_from": None}}
    return run_facts(run, sections, ["finetune_classifier", "record_run"], "cpu")


def test_a_record_is_redacted_and_takes_the_resolved_sections_only_when_the_run_trains():
    given = facts(corpus={"path": f"https://user:{SECRET}@host/c.txt"}, finetune={"train_path": "t.csv"})
    record = run_record(given, {"masking": {"probability": 0.3}, "training": {}},
                        DataRecord(source=f"http://reader:{SECRET}@host/c.txt", language="zh"))
    assert SECRET not in str(record) and SECRET not in str(record.to_json())
    assert record.section("masking") == {"probability": 0.15} and record.trained_model is None
    assert record.command == ("kedro run --env smoke --pipelines finetune --tags reporting --params "
                              "corpus.path=https://user:***@host/c.txt,finetune.train_path=t.csv")
    assert record.code["version"] and record.software["torch"] and record.device == "cpu"
    assert RunRecord.from_json(record.to_json()) == record  # the file reads back as it was written
    trained = run_record(replace(given, nodes=["train_masked_lm"]), {"masking": {"probability": 0.3}, "training": {}},
                         DataRecord())
    assert trained.section("masking") == {"probability": 0.3} and trained.sections_from_tuning == ["masking"]
    assert trained.trained_model == given.run_id


def test_command_line_of_a_default_run_and_of_a_record_of_an_earlier_version():
    assert RunRecord(env=None, pipelines=["__default__"], params={}).command_line() == "kedro run"
    earlier = RunRecord.from_json({"run_id": "r", "env": "smoke", "pipelines": ["training"], "unknown_key": 1,
                                   "corpus": {"source": "books", "token_store": {"version": "v"}, "other": 2}})
    assert earlier.command == "kedro run --env smoke --pipelines training" and earlier.corpus.source == "books"


def test_hub_datasets_of_a_corpus():
    assert hub_datasets({"hf_dataset": {"name": "wikitext", "config": "wikitext-2-raw-v1"}}) == ["wikitext"]
    assert hub_datasets({"path": "hf://datasets/owner/name@main/data/*.parquet"}) == ["owner/name"]
    assert hub_datasets({"sources": {"a": {"hf_dataset": "c4"}, "b": {"path": "/local/files"}}}) == ["c4"]
    assert hub_datasets({"path": "data/01_raw/books"}) == []


def test_a_mixtures_sources_line_gives_each_sources_store_share_and_weight():
    corpus = DataRecord(sources=[{"name": "新闻", "documents": 120, "tokens": 50_000, "weight": 0.7},
                                 {"name": "books", "documents": 3, "tokens": 9_000, "repeat": 2.0}])
    assert corpus.sources_line == ("新闻: 120 documents, 50,000 tokens, weight 0.7; "
                                   "books: 3 documents, 9,000 tokens, repeat 2.0")
    assert DataRecord(source="built-in corpus").sources_line is None
