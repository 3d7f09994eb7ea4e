"""No secret in any file: the corpus documents' manifest, every other artifact under data/, the
run lock and the log of a whole smoke chain whose corpus is read over HTTP with ``user:PASSWORD@``
and a presigned query's signature in its URL, and from an S3 server with credentials (a
credentials.yml entry), with storage options holding a key and with keys in environment variables,
every one given with ``--params``. And no result mistaken for a secret: the same run's fill-mask
tokens, baseline token and numbers are intact (results were redacted by key name: ``"token": "***"``).

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
SIGNATURE = "Sig-Query-5e1c9"  # a presigned URL's X-Amz-Signature


def new_key(credentials: dict, user: str) -> tuple[str, str]:
    """The access key of a new user of the S3 server who may read it (made by the fixture's reader,
    who may do anything there)."""
    import boto3

    iam = boto3.client("iam", endpoint_url=credentials["client_kwargs"]["endpoint_url"], region_name="us-east-1",
                       aws_access_key_id=credentials["key"], aws_secret_access_key=credentials["secret"])
    iam.create_user(UserName=user)
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    iam.put_user_policy(UserName=user, PolicyName="all", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=user)["AccessKey"]
    return key["AccessKeyId"], key["SecretAccessKey"]


@pytest.mark.slow
def test_a_secret_in_every_place_a_user_puts_one_reaches_no_file_no_log_and_no_result_is_masked(
        project_copy, http_root, s3_server, shared_data):
    root, base = http_root
    (root / "poems.txt").write_bytes((shared_data / "corpora" / "gutenberg" / "blake-poems.txt").read_bytes())
    wiki = (shared_data / "corpora" / "wikitext-2-raw" / "wiki.valid.raw").read_text(encoding="utf-8")
    (root / "held_out.txt").write_text(wiki[:20_000], encoding="utf-8")
    s3, credentials = s3_server
    reviews = pd.read_csv(shared_data / "corpora" / "chnsenticorp" / "ChnSentiCorp_htl_all.csv").dropna()
    for folder, rows in (("reviews", reviews.head(200)), ("stored", reviews.iloc[200:300]),
                         ("env", reviews.iloc[300:400])):
        body = gzip.compress(rows.to_csv(index=False).encode())
        s3.put_object(Bucket="corpora", Key=f"{folder}/part.csv.gz", Body=body)
    # Under --env smoke Kedro reads conf/base and conf/smoke, not conf/local.
    (project_copy / "conf" / "smoke" / "credentials.yml").write_text(yaml.safe_dump({"corpus_store": credentials}))
    stored_key, stored_secret = new_key(credentials, "storer")  # in the storage options (fs_args), with --params
    env_key, env_secret = new_key(credentials, "environment")  # in the environment only
    endpoint = credentials["client_kwargs"]["endpoint_url"]
    web = base.replace("http://", f"http://reader:{HTTP_PASSWORD}@") + f"/poems.txt?X-Amz-Signature={SIGNATURE}"
    sources = (f"corpus.sources.web.path={web},corpus.sources.web.weight=0.25,"
               "corpus.sources.reviews.path=s3://corpora/reviews/,corpus.sources.reviews.credentials=corpus_store,"
               "corpus.sources.reviews.text_column=review,corpus.sources.reviews.weight=0.25,"
               f"corpus.sources.stored.path=s3://corpora/stored/,corpus.sources.stored.fs_args.key={stored_key},"
               f"corpus.sources.stored.fs_args.secret={stored_secret},"
               f"corpus.sources.stored.fs_args.client_kwargs.endpoint_url={endpoint},"
               "corpus.sources.stored.text_column=review,corpus.sources.stored.weight=0.25,"
               "corpus.sources.env.path=s3://corpora/env/,"
               f"corpus.sources.env.fs_args.client_kwargs.endpoint_url={endpoint},"
               "corpus.sources.env.text_column=review,corpus.sources.env.weight=0.25,"
               f"evaluation.corpus_path={base.replace('http://', f'http://reader:{HTTP_PASSWORD}@')}/held_out.txt"
               f"?sig={SIGNATURE},tuning.n_trials=0,training.max_steps=2,training.batch_size=100000")
    # The real command in a process of its own: everything the process tree prints (the data engine's workers,
    # writes below Python's logging, warnings an earlier test in this process fired once) is the log.
    result = subprocess.run([sys.executable, "-m", "bert_mlm", "--env", "smoke", "--params", sources],
                            cwd=project_copy, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "KEDRO_DISABLE_TELEMETRY": "1", "BERT_MLM_LOGS": "plain",
                                 "AWS_ACCESS_KEY_ID": env_key, "AWS_SECRET_ACCESS_KEY": env_secret,
                                 "AWS_DEFAULT_REGION": "us-east-1"})
    log = result.stdout + result.stderr
    assert result.returncode == 0, result.stderr[-3000:]

    data = project_copy / "data"
    shards = DocumentShards(latest(data / "02_intermediate" / "corpus_documents"))
    assert shards.documents("train") > 100  # every source was read: the secrets were used, not lost
    assert set(shards.manifest["sources"]) == {"web", "reviews", "stored", "env"}
    settings = shards.manifest["settings"]
    masked = base.replace("http://", "http://reader:***@")
    assert settings["corpus"]["sources"]["web"]["path"] == f"{masked}/poems.txt?X-Amz-Signature=***"
    metrics = json.loads(latest(data / "08_reporting" / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["extra_corpus_path"] == f"{masked}/held_out.txt?sig=***"
    # The results are intact: tokens are results, not secrets.
    evaluation = json.loads(latest(data / "08_reporting" / "evaluation_metrics.json").read_text(encoding="utf-8"))
    assert metrics["baseline_token"] == evaluation["baseline_token"] not in ("***", "")
    predicted = [p["token"] for example in metrics["fill_mask_examples"] for p in example["predictions"]]
    assert predicted and "***" not in predicted and predicted == [
        p["token"] for example in evaluation["fill_mask_examples"] for p in example["predictions"]]
    for key in ("eval_loss", "eval_accuracy", "baseline_accuracy", "extra_eval_loss", "train_tokens"):
        assert isinstance(metrics[key], (int, float)) and metrics[key] == evaluation.get(key, metrics[key]) > 0, key
    assert "<code>***</code>" not in latest(data / "08_reporting" / "run_report.html").read_text(encoding="utf-8")
    # The run record and the model card name the corpus, redacted (the file scan below finds no secret in them).
    record = json.loads(latest(data / "08_reporting" / "run_config.json").read_text())
    assert record["sections"]["corpus"]["sources"]["web"]["path"] == settings["corpus"]["sources"]["web"]["path"]
    assert "--params corpus.sources.web.path=http://reader:***@" in record["command"]
    card = (latest(data / "06_models" / "masked_lm") / "README.md").read_text(encoding="utf-8")
    assert "web=http://reader:***@" in card and "s3://corpora/reviews/" in card
    secrets = [HTTP_PASSWORD, SIGNATURE, credentials["secret"], stored_secret, env_secret]
    files = [p for p in data.rglob("*") if p.is_file()]
    assert len(files) > 30  # every artifact of the chain: shards, store, model, tuning database, report ...
    for path in files:
        content = path.read_bytes()
        for secret in secrets:
            assert secret.encode() not in content, f"{secret!r} written to {path}"
    assert f"'{masked}/poems.txt?X-Amz-Signature=***'" in log  # the log names the sources, redacted
    for secret in secrets:
        assert secret not in log
    assert not (data / run_lock.LOCK_NAME).exists() and not (data / run_lock.HOLDER_NAME).exists()
    # batch_size=100000: warned about up front, and each step held the whole train split.
    assert "training.batch_size=100000: a step of that many sequences" in log
    # (A mixture's epoch is its weighted draw of the stored sequences: one step per epoch.)
    history = pd.read_csv(latest(data / "07_model_output" / "training_history.csv"))
    # ~1,000 sequences of 64 tokens in the draw (the reviews' 400 rows and the poems): ~65,000 tokens a step.
    assert history["epoch"].tolist() == [0, 1] and history["tokens"].min() > 50_000


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
