"""One redaction for every record: URL user info, signed query strings, connection strings,
``--params`` lists and secret-named settings are masked; everything else is kept as it is."""

from __future__ import annotations

import pytest

from bert_mlm.core.common.redaction import MASK, is_secret_name, redact

MASKED = [
    ("http://user:PASSWORD@host/corpus.txt", "http://user:***@host/corpus.txt"),
    ("https://user:p@ss@host/a@b.txt", "https://user:***@host/a@b.txt"),  # an unescaped @ in the password
    ("https://ghp_TOKEN123@github.com/o/r.git", "https://***@github.com/o/r.git"),  # a token as the user name
    ("postgresql://user:s3cr%40t@db:5432/optuna", "postgresql://user:***@db:5432/optuna"),
    ("s3://bucket/k.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F20260101&X-Amz-Date=20260101T0"
     "&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Security-Token=FwoG&X-Amz-Signature=ab12",
     "s3://bucket/k.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=***&X-Amz-Date=20260101T0"
     "&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Security-Token=***&X-Amz-Signature=***"),
    ("https://acct.blob.core.windows.net/c/f.txt?sv=2022-11-02&se=2026-01-01&sr=b&sp=r&sig=AbC%2Bd%3D",
     "https://acct.blob.core.windows.net/c/f.txt?sv=2022-11-02&se=2026-01-01&sr=b&sp=r&sig=***"),
    ("https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4&X-Goog-Credential=sa%40p&X-Goog-Signature=9f",
     "https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4&X-Goog-Credential=***&X-Goog-Signature=***"),
    ("https://bucket.s3.amazonaws.com/k?AWSAccessKeyId=AKIA&Expires=1&Signature=xyz",
     "https://bucket.s3.amazonaws.com/k?AWSAccessKeyId=AKIA&Expires=1&Signature=***"),
    ("https://api.example/data?key=AIzaSy&alt=json", "https://api.example/data?key=***&alt=json"),
    ("https://hf.co/x?access_token=hf_abc#frag", "https://hf.co/x?access_token=***#frag"),
    ("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Zm9v==;EndpointSuffix=core.windows.net",
     "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=***;EndpointSuffix=core.windows.net"),
    ("kedro run --params corpus.path=http://u:pw@h/x,corpus.hf_dataset.token=hf_abc,masking.mask_token_fraction=0.8",
     "kedro run --params corpus.path=http://u:***@h/x,corpus.hf_dataset.token=***,masking.mask_token_fraction=0.8"),
    ("中文语料 https://用户:密码@例子.中国/语料.txt", "中文语料 https://用户:***@例子.中国/语料.txt"),
]

KEPT = [
    "sqlite:///data/07_model_output/tuning/optuna.db",
    "journal:data/optuna.log",
    "s3://bucket/books/*.txt.gz",
    "hf://datasets/wikitext/wikitext-2-raw-v1/train-00000.parquet",
    "mailto:someone@example.org and someone@example.org",
    "a parameter is written section.key=value (e.g. masking.probability=0.3)",
    "masking.mask_token_fraction=0.8,training.max_steps=12",
    "../shared/corpora/gutenberg/austen-emma.txt",
]


@pytest.mark.parametrize(("text", "expected"), MASKED)
def test_secrets_in_urls_connection_strings_and_command_lines_are_masked(text, expected):
    assert redact(text) == expected
    assert redact(expected) == expected  # redacting twice changes nothing


@pytest.mark.parametrize("text", KEPT)
def test_text_without_a_secret_is_kept_as_it_is(text):
    assert redact(text) == text


def test_nested_settings_are_redacted_item_by_item():
    settings = {
        "corpus": {
            "path": "http://reader:Sesame@host/c.txt",
            "credentials": {"key": "AKIAEXAMPLE", "secret": "wJalr", "token": None, "anon": False,
                            "client_kwargs": {"endpoint_url": "http://127.0.0.1:9000", "region_name": "us-east-1"}},
            "sources": {"web": {"path": "https://u:p@h/x.txt", "weight": 0.5},
                        "hub": {"hf_dataset": {"name": "wikitext", "token": "hf_secret"}}},
            "aws_access_key_id": "AKIA-an-identifier",
            "aws_secret_access_key": "the-secret",
            "sas_token": "sv=2022&sig=abc",
        },
        "masking": {"mask_token_fraction": 0.8, "probability": 0.15},
        "history": [{"password": "x"}, ("https://u:p@h/", 3)],
    }
    redacted = redact(settings)
    corpus = redacted["corpus"]
    assert corpus["path"] == "http://reader:***@host/c.txt"
    assert corpus["credentials"] == {"key": MASK, "secret": MASK, "token": None, "anon": False,
                                     "client_kwargs": {"endpoint_url": "http://127.0.0.1:9000",
                                                       "region_name": "us-east-1"}}
    assert corpus["sources"]["web"] == {"path": "https://u:***@h/x.txt", "weight": 0.5}
    assert corpus["sources"]["hub"]["hf_dataset"] == {"name": "wikitext", "token": MASK}
    assert corpus["aws_access_key_id"] == "AKIA-an-identifier"  # an identifier, not the secret
    assert corpus["aws_secret_access_key"] == MASK and corpus["sas_token"] == MASK
    assert redacted["masking"] == settings["masking"]
    assert redacted["history"] == [{"password": MASK}, ("https://u:***@h/", 3)]
    assert settings["corpus"]["path"] == "http://reader:Sesame@host/c.txt"  # the input is not changed


@pytest.mark.parametrize(("name", "secret"), [
    ("password", True), ("X-Amz-Signature", True), ("AccountKey", True), ("client_secret", True),
    ("corpus.hf_dataset.token", True), ("sig", True), ("apiKey", True), ("Authorization", True),
    ("mask_token_fraction", False), ("tokenizer", False), ("keep_checkpoints", False), ("key_file", False),
    ("aws_access_key_id", False), ("split_salt", False), ("max_tokens", False),
])
def test_the_last_word_of_a_name_decides(name, secret):
    assert is_secret_name(name) is secret
