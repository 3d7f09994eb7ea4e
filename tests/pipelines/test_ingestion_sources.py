"""Corpus sources through real Kedro sessions: credentials from conf/local/credentials.yml for an
S3 server started here, a mixture of a compressed file and a Hugging Face dataset saved to disk
through the whole smoke chain, and a corpus declared as another Kedro dataset in the catalog."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest
import yaml

from bert_mlm.core.corpus import CorpusError
from bert_mlm.core.documents import DocumentShards
from tests.kedro_runs import latest, run_session


@pytest.fixture
def book(shared_data) -> bytes:
    return (shared_data / "corpora" / "gutenberg" / "austen-persuasion.txt").read_bytes()


def test_an_s3_corpus_with_credentials_from_credentials_yml(project_copy, monkeypatch, s3_server, book):
    s3, credentials = s3_server
    s3.put_object(Bucket="corpora", Key="books/persuasion.txt.gz", Body=gzip.compress(book))
    local = project_copy / "conf" / "local"
    local.mkdir(parents=True, exist_ok=True)
    (local / "credentials.yml").write_text(yaml.safe_dump({"corpus_store": credentials}))
    run_session(project_copy, monkeypatch, env="local", pipeline_name="ingestion",
                **{"corpus.path": "s3://corpora/books/", "corpus.credentials": "corpus_store"})
    shards = DocumentShards(latest(project_copy / "data" / "02_intermediate" / "corpus_documents"))
    assert shards.documents("train") > 500
    assert shards.manifest["settings"]["source"] == "s3://corpora/books/"

    wrong = {**credentials, "secret": "a-wrong-secret"}
    (local / "credentials.yml").write_text(yaml.safe_dump({"corpus_store": wrong}))
    with pytest.raises(Exception) as info:  # Kedro wraps the dataset's error; the cause is one line
        run_session(project_copy, monkeypatch, env="local", **{"corpus.path": "s3://corpora/books/",
                                                               "corpus.credentials": "corpus_store"})
    cause = info.value
    while not isinstance(cause, CorpusError) and cause.__cause__ is not None:
        cause = cause.__cause__
    assert isinstance(cause, CorpusError) and "was refused" in str(cause) and "a-wrong-secret" not in str(cause)
    assert not (project_copy / "data" / "05_model_input").exists() or not any(
        (project_copy / "data" / "05_model_input").rglob("train.bin"))  # it stopped before tokenizing


@pytest.mark.slow
def test_a_mixture_of_a_gzip_file_and_a_saved_hf_dataset_through_the_smoke_chain(project_copy, monkeypatch,
                                                                                 shared_data, book, tmp_path):
    datasets = pytest.importorskip("datasets")
    (tmp_path / "books.txt.gz").write_bytes(gzip.compress(book))
    lines = (shared_data / "corpora" / "wikitext-2-raw" / "wiki.valid.raw").read_text(encoding="utf-8").splitlines()
    rows = [line.strip() for line in lines if len(line.split()) > 8]
    datasets.Dataset.from_dict({"content": rows}).save_to_disk(tmp_path / "wiki")
    sources = {"books": {"path": str(tmp_path / "books.txt.gz"), "weight": 0.7},
               "wiki": {"hf_dataset": {"path": str(tmp_path / "wiki"), "text_column": "content"}, "weight": 0.3}}
    # Set where a user sets it: the corpus section of the environment's parameters (the catalog reads it there).
    corpus_file = project_copy / "conf" / "smoke" / "parameters_corpus.yml"
    corpus_file.write_text(yaml.safe_dump({"corpus": {"sources": sources}}))
    run_session(project_copy, monkeypatch, **{"tuning.n_trials": 0})  # the mixture is the subject, not the study
    data = project_copy / "data"
    corpus = pd.read_csv(latest(data / "08_reporting" / "corpus_stats.csv")).set_index("split")
    tokens = pd.read_csv(latest(data / "08_reporting" / "tokenization_stats.csv")).set_index("split")
    for name, weight in (("books", 0.7), ("wiki", 0.3)):
        assert corpus.loc[f"train:{name}", "stream_share_of_characters"] == pytest.approx(weight, abs=0.01)
        assert tokens.loc[f"train:{name}", "share"] == pytest.approx(weight, abs=0.02)
    assert tokens.loc["train:books", "tokens"] + tokens.loc["train:wiki", "tokens"] == tokens.loc["train", "tokens"]
    report = latest(data / "08_reporting" / "run_report.html").read_text()
    assert "train:books" in report and "train:wiki" in report
    assert json.loads(latest(data / "08_reporting" / "metrics.json").read_text())["eval_loss"] > 0


def test_a_corpus_declared_as_another_kedro_dataset(project_copy, monkeypatch, shared_data):
    reviews = pd.read_csv(shared_data / "corpora" / "chnsenticorp" / "ChnSentiCorp_htl_all.csv").dropna()
    reviews.head(2000).to_parquet(project_copy / "data" / "reviews.parquet")
    conf = project_copy / "conf" / "local"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "catalog.yml").write_text(yaml.safe_dump(
        {"raw_corpus": {"type": "pandas.ParquetDataset", "filepath": "data/reviews.parquet"}}))
    run_session(project_copy, monkeypatch, env="local", pipeline_name="ingestion", **{"corpus.text_column": "review"})
    shards = DocumentShards(latest(project_copy / "data" / "02_intermediate" / "corpus_documents"))
    assert sum(shards.documents(s) for s in ("train", "valid", "test")) > 1900
    assert shards.manifest["settings"]["source"] == "catalog:raw_corpus"
    assert any("酒店" in t for t in shards.frame("train")["text"].head(50))
