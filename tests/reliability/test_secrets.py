"""No secret in any file: the corpus documents' manifest, every other artifact under data/, the
run lock and the log of a whole smoke chain whose corpus is read over HTTP with ``user:PASSWORD@``
in its URL and from an S3 server with credentials.

The same chain (one run: the suite's time) trains with ``training.batch_size=100000``: refused up
front with "needs about 38.8 GB" on the smoke corpus before, although a step never holds more than
the train split's sequences (748 there, 1.3 GB; tests/reliability/test_configuration.py checks those
numbers)."""

from __future__ import annotations

import gzip
import json
import os
import stat
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from bert_mlm import run_lock
from bert_mlm.core.data.documents import DocumentShards
from tests.kedro_runs import latest

HTTP_PASSWORD = "Sesame-Http-7f3a"


@pytest.mark.slow
def test_a_chain_over_http_with_a_password_and_s3_with_credentials_writes_no_secret(
        project_copy, http_root, s3_server, shared_data):
    root, base = http_root
    (root / "poems.txt").write_bytes((shared_data / "corpora" / "gutenberg" / "blake-poems.txt").read_bytes())
    wiki = (shared_data / "corpora" / "wikitext-2-raw" / "wiki.valid.raw").read_text(encoding="utf-8")
    (root / "held_out.txt").write_text(wiki[:20_000], encoding="utf-8")
    s3, credentials = s3_server
    reviews = pd.read_csv(shared_data / "corpora" / "chnsenticorp" / "ChnSentiCorp_htl_all.csv").dropna().head(800)
    table = gzip.compress(reviews.to_csv(index=False).encode())
    s3.put_object(Bucket="corpora", Key="reviews/reviews.csv.gz", Body=table)
    # Under --env smoke Kedro reads conf/base and conf/smoke, not conf/local.
    (project_copy / "conf" / "smoke" / "credentials.yml").write_text(yaml.safe_dump({"corpus_store": credentials}))
    web = base.replace("http://", f"http://reader:{HTTP_PASSWORD}@") + "/poems.txt"
    sources = (f"corpus.sources.web.path={web},corpus.sources.web.weight=0.5,"
               "corpus.sources.reviews.path=s3://corpora/reviews/,corpus.sources.reviews.credentials=corpus_store,"
               "corpus.sources.reviews.text_column=review,corpus.sources.reviews.weight=0.5,"
               f"evaluation.corpus_path={web.replace('poems.txt', 'held_out.txt')},"
               "tuning.n_trials=0,training.max_steps=2,training.batch_size=100000")
    result = subprocess.run([sys.executable, "-m", "bert_mlm", "--env", "smoke", "--params", sources],
                            cwd=project_copy, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "KEDRO_DISABLE_TELEMETRY": "1", "BERT_MLM_LOGS": "plain"})
    assert result.returncode == 0, result.stderr[-3000:]

    data = project_copy / "data"
    shards = DocumentShards(latest(data / "02_intermediate" / "corpus_documents"))
    assert shards.documents("train") > 100  # both sources were read: the secrets were used, not lost
    settings = shards.manifest["settings"]
    assert settings["corpus"]["sources"]["web"]["path"] == base.replace("http://", "http://reader:***@") + "/poems.txt"
    metrics = json.loads(latest(data / "08_reporting" / "metrics.json").read_text())
    assert metrics["extra_corpus_path"] == base.replace("http://", "http://reader:***@") + "/held_out.txt"
    # The run record and the model card name the corpus, redacted (the file scan below finds no secret in them).
    record = json.loads(latest(data / "08_reporting" / "run_config.json").read_text())
    assert record["sections"]["corpus"]["sources"]["web"]["path"] == settings["corpus"]["sources"]["web"]["path"]
    assert "--params corpus.sources.web.path=http://reader:***@" in record["command"]
    card = (latest(data / "06_models" / "masked_lm") / "README.md").read_text(encoding="utf-8")
    assert "web=http://reader:***@" in card and "s3://corpora/reviews/" in card
    secrets = [HTTP_PASSWORD, credentials["secret"]]
    files = [p for p in data.rglob("*") if p.is_file()]
    assert len(files) > 30  # every artifact of the chain: shards, store, model, tuning database, report ...
    for path in files:
        content = path.read_bytes()
        for secret in secrets:
            assert secret.encode() not in content, f"{secret!r} written to {path}"
    for secret in secrets:
        assert secret not in result.stdout + result.stderr  # the log
    assert not (data / run_lock.LOCK_NAME).exists() and not (data / run_lock.HOLDER_NAME).exists()
    # batch_size=100000: warned about up front, and each step held the whole train split.
    assert "training.batch_size=100000: a step of that many sequences" in result.stdout + result.stderr
    history = pd.read_csv(latest(data / "07_model_output" / "training_history.csv"))
    split = pd.read_csv(latest(data / "08_reporting" / "sequence_stats.csv")).set_index("split")
    assert len(history) == 2 and (history["tokens"] == split.loc["train", "tokens"]).all()


def test_the_run_lock_is_private_names_its_holder_without_secrets_and_is_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["kedro", "run", "--params",
                                      "corpus.path=https://reader:Sesame-9@host/c.txt,tuning.storage=postgresql://u:pw9@h/db"])
    lock = run_lock.acquire(tmp_path)
    try:
        holder = run_lock.holder_path(tmp_path)
        for path in (lock, holder):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        text = holder.read_text()
        assert "Sesame-9" not in text and "pw9" not in text
        assert "corpus.path=https://reader:***@host/c.txt" in text
        described = run_lock._describe(holder)
        assert described.startswith(f"pid {os.getpid()}, started ") and "reader:***@host" in described
    finally:
        run_lock.release(tmp_path)
    assert not lock.exists() and not run_lock.holder_path(tmp_path).exists()
