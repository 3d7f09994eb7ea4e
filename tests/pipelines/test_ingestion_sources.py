"""Corpus sources through real Kedro sessions: credentials from conf/local/credentials.yml for an
S3 server started here, a mixture of a compressed file and a Hugging Face dataset saved to disk
through the whole smoke chain, and a corpus declared as another Kedro dataset in the catalog."""

from __future__ import annotations

import gzip
import io
import json
import logging
import re

import pandas as pd
import pytest
import yaml
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project

from bert_mlm.core.data.corpus import CorpusError
from bert_mlm.core.data.documents import DocumentShards
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
    (tmp_path / "books.txt.gz").write_bytes(gzip.compress(book[:200_000]))  # the mixture is the subject, not volume
    lines = (shared_data / "corpora" / "wikitext-2-raw" / "wiki.valid.raw").read_text(encoding="utf-8").splitlines()
    rows = [line.strip() for line in lines if len(line.split()) > 8][:800]
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
    sequences = pd.read_csv(latest(data / "08_reporting" / "sequence_stats.csv")).set_index("split")
    # Stored once each, unweighted: the sources' rows add up to the train split.
    assert corpus.loc["train:books", "train_documents"] + corpus.loc["train:wiki", "train_documents"] == corpus.loc[
        "train", "documents"]
    assert tokens.loc["train:books", "tokens"] + tokens.loc["train:wiki", "tokens"] == tokens.loc["train", "tokens"]
    assert sequences.loc["train:books", "sequences"] + sequences.loc["train:wiki", "sequences"] == sequences.loc[
        "train", "sequences"]
    # The weights are an epoch's shares, counted on the drawn index: within one sequence of each weight.
    metrics = json.loads(latest(data / "08_reporting" / "metrics.json").read_text())
    epoch = sum(source["epoch_sequences"] for source in metrics["mixture"].values())
    assert epoch == sequences.loc["train", "sequences"]
    for name, weight in (("books", 0.7), ("wiki", 0.3)):
        assert abs(metrics["mixture"][name]["epoch_sequences"] - weight * epoch) < 1
    report = latest(data / "08_reporting" / "run_report.html").read_text()
    assert "train:books" in report and "train:wiki" in report and "share of a training epoch" in report
    # The run record names each source with its weight and its range of the token store.
    record = json.loads(latest(data / "08_reporting" / "run_config.json").read_text())
    assert [(s["name"], s["weight"]) for s in record["corpus"]["sources"]] == [("books", 0.7), ("wiki", 0.3)]
    assert all(s["tokens"] > 0 and s["documents"] > 0 for s in record["corpus"]["sources"])
    assert "books: " in report and ", weight 0.7; wiki: " in report
    assert metrics["eval_loss"] > 0


def _mixture_run(project, monkeypatch, sources: dict,
                 pipelines=("ingestion", "tokenization", "sequences", "tuning", "training")) -> tuple[dict, str]:
    """The data stages, tuning (no trials) and 2 training steps on a mixture (or ``pipelines``); the newest
    training summary and the log."""
    # Where a user sets it: the corpus section of the environment's parameters (the catalog reads it there).
    (project / "conf" / "smoke" / "parameters_corpus.yml").write_text(yaml.safe_dump({"corpus": {"sources": sources}}))
    monkeypatch.chdir(project)
    bootstrap_project(project)  # configures the project's logging: the handler comes after
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    logging.getLogger().addHandler(handler)
    try:
        runtime = {"tuning": {"n_trials": 0}, "training": {"max_steps": 2, "checkpoint_every": 0}}
        with KedroSession.create(project_path=project, env="smoke", runtime_params=runtime) as session:
            session.run(pipeline_names=list(pipelines))
    finally:
        logging.getLogger().removeHandler(handler)
    data = project / "data"
    return json.loads(latest(data / "07_model_output" / "training_summary.json").read_text()), log.getvalue()


@pytest.mark.slow
def test_a_changed_mixture_weight_reruns_no_data_stage(project_copy, monkeypatch, shared_data):
    """0.7/0.3 -> 0.5/0.5: every data stage is reused (logged, hard links, the same digests), and the
    training epoch draws the new shares, within one sequence; a changed file re-runs the stages."""
    books = shared_data / "corpora" / "gutenberg"
    corpus = project_copy / "corpus"
    corpus.mkdir()
    # 600 of the hotel reviews and 120 kB of a book: the reuse is the subject, not volume
    reviews = corpus / "reviews.csv"
    pd.read_csv(shared_data / "corpora" / "chnsenticorp" / "ChnSentiCorp_htl_all.csv").head(600).to_csv(reviews)
    (corpus / "book.txt").write_bytes((books / "austen-persuasion.txt").read_bytes()[:120_000])
    sources = {"book": {"path": str(corpus / "book.txt"), "weight": 0.7},
               "reviews": {"path": str(reviews), "text_column": "review", "weight": 0.3}}
    first, log = _mixture_run(project_copy, monkeypatch, sources)
    assert "reused it" not in log and "encoding:" in log
    even = {name: {**spec, "weight": 0.5} for name, spec in sources.items()}
    second, log = _mixture_run(project_copy, monkeypatch, even)
    reused = [line for line in log.splitlines() if "reused it (hard links)" in line]
    assert {line.split(":")[0] for line in reused} == {"corpus_documents", "tokenizer", "token_store", "sequence_index"}
    # No progress line of the stages that read the text (the run's plan names them, with no count).
    assert not re.search(r"(encoding|ingestion): [\d.]+/[\d.]+ M", log) and "Trained a WordPiece" not in log
    data = project_copy / "data"
    stores = sorted((data / "04_feature" / "token_store").glob("*/token_store/train.bin"))
    assert len(stores) == 2 and stores[0].stat().st_ino == stores[1].stat().st_ino  # the same bytes, not a copy
    epoch = sum(s["epoch_sequences"] for s in first["mixture"].values())
    for summary, weights in ((first, {"book": 0.7, "reviews": 0.3}), (second, {"book": 0.5, "reviews": 0.5})):
        for name, weight in weights.items():
            assert abs(summary["mixture"][name]["epoch_sequences"] - weight * epoch) < 1
    (corpus / "book.txt").write_bytes((books / "austen-persuasion.txt").read_bytes()[:100_000])  # the corpus changed
    _, log = _mixture_run(project_copy, monkeypatch, even, pipelines=("ingestion", "tokenization"))
    assert "corpus_documents: this run's inputs" not in log and "encoding:" in log


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
