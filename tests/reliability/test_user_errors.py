"""Case 6 of the reliability pass: a user error ends `kedro run` with one line naming the
parameter and exit status 2, no traceback, before any data stage runs; a bug keeps its traceback."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys

import pytest
import yaml

from bert_mlm.cli import user_error_in
from bert_mlm.config import TokenizerConfig
from bert_mlm.core.tokens.tokenizer import train_wordpiece
from bert_mlm.errors import UserError
from tests.kedro_runs import kedro_cli

CASES = [
    ("masking.probability=abc", r"masking\.probability: 'abc' must be a number"),
    ("masking.probability=null", r"masking\.probability: None must be a number"),
    ("training.batch_size=true", r"training\.batch_size: True must be a number, not true/false"),
    ("trainig.max_steps=3", r"trainig: unknown parameter section; did you mean 'training'\?"),
    ("tuning.storage=notaurl", r"tuning\.storage: 'notaurl' cannot be opened: ArgumentError"),
    (
        "tuning.storage=postgresql://nobody@127.0.0.1:1/db",
        r"tuning\.storage: 'postgresql://\*\*\*@127\.0\.0\.1:1/db' cannot be opened",  # a lone user may be a token
    ),
    (
        "tuning.storage=sqlite:////proc/no/such/dir/optuna.db",
        r"tuning\.storage: 'sqlite:////proc/no/such/dir/optuna\.db' cannot be opened",
    ),
    (
        "../x.overrides.masking.probability=0.3",
        r"--params \.\./x\.overrides\.masking\.probability: '' is not a section name; "
        r"a parameter is written section\.key=value",
    ),
    (
        "evaluation.corpus_path=/no/such/held_out.txt",
        r"evaluation\.corpus_path: '/no/such/held_out\.txt' does not exist",
    ),
    (
        "corpus.path=/no/such/books.txt,corpus.hf_dataset.name=wikitext",
        r"corpus: give one of corpus\.path, corpus\.hf_dataset or corpus\.sources, not corpus\.path and "
        r"corpus\.hf_dataset",
    ),
    ("corpus.line_by_line=sometimes", r"corpus\.line_by_line: 'sometimes' must be 'auto', true or false"),
]


@pytest.mark.parametrize(("override", "message"), CASES,
                         ids=[c[0].split("=")[0] + "=" + c[0].split("=")[1][:12] for c in CASES])
def test_a_user_error_is_one_line_before_any_work(project_copy, override, message):

    result = kedro_cli(project_copy, "--params", override)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr + result.stdout
    last = result.stderr.strip().splitlines()[-1]
    assert re.match(rf"Error: {message}", last), last
    assert "BERT_MLM_DEBUG=1" in last
    assert not (project_copy / "data" / "02_intermediate").exists()  # stopped before the data stages


HOLES = [  # values that used to pass the checks and fail late, or never; "0.8" is quoted in the file: a string
    ("masking.mask_token_fraction", "0.8", "masking.mask_token_fraction: '0.8' must be a number in [0, 1]"),
    ("training.weight_decay", -5, "training.weight_decay: -5 must be >= 0"),
    ("training.adam_beta2", 7, "training.adam_beta2: 7 must be in [0, 1)"),
    ("training.max_nonfinite_steps", 0, "training.max_nonfinite_steps: 0 must be a positive integer"),
    ("model.hidden_dropout_prob", "0.1", "model.hidden_dropout_prob: '0.1' must be a number in [0, 1)"),
    ("training.epochs", 2, "training.epochs: 2 and training.max_steps: 12 both set the training budget"),
]


@pytest.mark.parametrize(("dotted", "value", "message"), HOLES, ids=[h[0] for h in HOLES])
def test_a_bad_value_in_a_parameters_file_is_one_line_before_any_work(project_copy, dotted, value, message):
    path = project_copy / "conf" / "smoke" / "parameters.yml"
    parameters = yaml.safe_load(path.read_text())
    section, key = dotted.split(".")
    parameters.setdefault(section, {})[key] = value
    path.write_text(yaml.safe_dump(parameters))
    result = kedro_cli(project_copy)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr + result.stdout
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"Error: {message}"), last
    assert not (project_copy / "data" / "02_intermediate").exists()  # stopped before the data stages


@pytest.mark.slow
def test_the_command_line_ends_a_user_error_with_one_line_and_status_2(project_copy):
    result = subprocess.run([sys.executable, "-m", "bert_mlm", "--env", "smoke", "--params", "masking.probability=abc"],
                            cwd=project_copy, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "KEDRO_DISABLE_TELEMETRY": "1"})
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr + result.stdout
    last = result.stderr.strip().splitlines()[-1]
    assert re.fullmatch(
        r"Error: masking\.probability: 'abc' must be a number.*  \(BERT_MLM_DEBUG=1 shows the traceback\)", last
    ), last
    assert not (project_copy / "data" / "02_intermediate").exists()


def test_the_debug_switch_shows_the_traceback(project_copy):
    result = kedro_cli(project_copy, "--params", "masking.probability=abc", BERT_MLM_DEBUG="1")
    assert result.returncode != 0 and "Traceback" in result.stderr


def test_a_user_error_wrapped_by_a_dataset_is_still_a_user_error_and_a_bug_is_not():
    from kedro.io import DatasetError

    try:
        try:
            raise UserError("corpus.path: 'x' does not exist")
        except UserError as error:
            raise DatasetError(str(error)) from error
    except DatasetError as wrapped:
        assert str(user_error_in(wrapped)) == "corpus.path: 'x' does not exist"
    assert user_error_in(KeyError("a bug")) is None


def test_a_vocabulary_larger_than_asked_for_is_said(caplog):
    texts = ["the quick brown fox jumps over the lazy dog " * 3, "pack my box with five dozen liquor jugs"] * 20
    with caplog.at_level(logging.WARNING, logger="bert_mlm.core.tokens.tokenizer"):
        tokenizer = train_wordpiece(texts, TokenizerConfig(vocab_size=10, base_alphabet="none"))
    assert len(tokenizer) > 10
    assert re.search(rf"the vocabulary has {len(tokenizer)} tokens, more than the 10 asked for", caplog.text)


def test_a_storage_url_without_its_driver_names_the_package_and_hides_the_password(project_copy):
    # No PostgreSQL driver is installed here: SQLAlchemy fails on import, before any connection.
    result = kedro_cli(project_copy, "--params", "tuning.storage=postgresql://user:secret@localhost/db")
    assert result.returncode == 2, result.stderr[-2000:]
    assert "secret" not in result.stderr + result.stdout
    last = result.stderr.strip().splitlines()[-1]
    assert re.match(r"Error: tuning\.storage: 'postgresql://user:\*\*\*@localhost/db' cannot be opened", last), last
    assert re.search(r"the database driver 'psycopg2?' is not installed \(pip install 'psycopg", last), last


def test_a_storage_url_is_shown_without_its_password():
    from bert_mlm.core.common.redaction import redact

    assert redact("postgresql://user:s3cr%40t@db.example:5432/optuna") == "postgresql://user:***@db.example:5432/optuna"
    assert redact("mysql+pymysql://user:secret@h/db?charset=utf8") == "mysql+pymysql://user:***@h/db?charset=utf8"
    assert redact("sqlite:///data/optuna.db") == "sqlite:///data/optuna.db"
    assert redact("journal:data/optuna.log") == "journal:data/optuna.log"
    assert redact("notaurl") == "notaurl"


@pytest.mark.parametrize("kind", ["empty file", "empty folder", "binary file"])
def test_an_unreadable_extra_evaluation_corpus_is_named_as_evaluation_corpus_path(project_copy, tmp_path, kind):
    """An empty or binary evaluation.corpus_path is refused before the data stages (a binary one was
    found only after training)."""
    target = tmp_path / "held_out"
    target.mkdir()
    if kind != "empty folder":
        target = target / "held_out.txt"
        target.write_bytes(b"" if kind == "empty file" else bytes(range(32)) * 100)
    result = kedro_cli(project_copy, "--params", f"evaluation.corpus_path={target}")
    assert result.returncode == 2, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    expected = {"empty file": f"'{target}' is empty (1 file(s), 0 bytes)", "empty folder": f"'{target}' holds no "
                "corpus file", "binary file": f"corpus file '{target}' looks binary"}[kind]
    assert last.startswith(f"Error: evaluation.corpus_path: {expected}"), last
    assert not (project_copy / "data" / "02_intermediate").exists()  # stopped before the data stages


def test_an_unknown_namespace_is_one_line_naming_the_valid_ones(project_copy):
    result = kedro_cli(project_copy, "--pipeline", "mask_rate_comparison", "--namespaces", "../mask_030")
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr + result.stdout
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "Error: --namespaces: '../mask_030' is not a namespace of the pipeline 'mask_rate_comparison'; "
        "its namespaces: mask_015, mask_030, mask_045"
    ), last


@pytest.mark.slow
def test_an_explicit_value_the_tuned_one_replaces_is_warned_about(smoke_chain_copy):
    # The smoke environment tunes (2 trials) and always adopts the tuned probability (the shared chain's data
    # stages are reused).
    result = kedro_cli(smoke_chain_copy, "--params", "masking.probability=0.3", "--pipeline", "__default__",
                       "--to-nodes", "train_masked_lm")
    assert result.returncode == 0, result.stderr[-3000:]
    log = result.stdout + result.stderr
    warning = re.search(r"masking\.probability: your --params value 0\.3 is set aside for (0\.\d+) \(from tuning\); "
                        r"to train with yours, set --params tuning\.n_trials=0", log)
    assert warning, log[-3000:]
    assert re.search(rf"Training with masking \{{'probability': {warning.group(1)}", log)


def test_a_failed_run_leaves_no_empty_version_folder(project_copy, tmp_path):
    (tmp_path / "short.txt").write_text("too short\n\nalso short\n")  # nothing survives corpus.min_words
    result = kedro_cli(project_copy, "--pipeline", "ingestion", "--params", f"corpus.path={tmp_path / 'short.txt'}")
    assert result.returncode == 2, result.stderr[-2000:]
    assert "corpus.path: the corpus is empty after cleaning" in result.stderr
    # The shards' save made a version folder before the corpus turned out empty: it is gone, with its dataset folder.
    assert not (project_copy / "data" / "02_intermediate" / "corpus_documents").exists()


KEDRO_MISTAKES = [
    (["--pipelines", "trainig"],
     r"--pipelines: 'trainig' is not a pipeline of this project; did you mean 'training'\? "
     r"the pipelines are __default__, evaluation, finetune, ingestion, "),
    (["--env", "nonexist"],
     r"--env: 'nonexist' is not an environment of this project \(no folder '.*/conf/nonexist'\); "
     r"the environments are base, gpu, local, smoke, zh"),
    (["--pipelines", "training"],
     r"--pipelines training: it reads resolved_masking \(data/07_model_output/resolved_masking\.json\), "
     r".*sequence_index \(data/05_model_input/sequence_index\), .* which no earlier run has written; run "
     r"`kedro run --pipelines ingestion,tokenization,sequences,tuning` first"),
    (["--pipelines", "finetune"],
     # the stage's own input first, then what the reporting nodes after it read
     r"--pipelines finetune: it reads trained_model \(data/06_models/masked_lm\), corpus_documents .*which no "
     r"earlier run has written; run `kedro run --pipelines ingestion,tokenization,sequences,"
     r"tuning,training` first \(or the whole chain: `kedro run`\)"),
    (["--pipelines", "evaluation"],  # no fine-tuning needed: its result is optional
     r"--pipelines evaluation: it reads corpus_documents .* run `kedro run --pipelines "
     r"ingestion,tokenization,sequences,tuning,training` first"),
    (["--pipelines", "reporting"],
     r"--pipelines reporting: it reads evaluation_metrics .*corpus_stats .* run `kedro run --pipelines "
     r"ingestion,tokenization,sequences,tuning,training,evaluation` first"),
    (["--nodes", "train_maskedlm"],
     r"--nodes: 'train_maskedlm' is not a node of the pipeline '__default__'; did you mean 'train_masked_lm'\? "
     r"its nodes: build_model_inputs, "),
    (["--tags", "trainnig"], r"--tags: 'trainnig' is not a tag of the pipeline '__default__'; its tags: data, "),
    (["--runner", "SequentialRuner"], r"--runner: 'SequentialRuner' is not a Kedro runner \(AttributeError: .*\); use "
                                      r"SequentialRunner, ThreadRunner or ParallelRunner"),
    (["--pipelines", "finetune", "--load-versions", "trained_model:2026-01-01T00.00.00.000Z"],
     r"--load-versions: trained_model:2026-01-01T00\.00\.00\.000Z is not a version of trained_model "
     r"\(data/06_models/masked_lm\); its newest versions: none: no run has written it yet"),
    (["--load-versions", "trained_modle:x"], r"conf: 'load_versions' keys \[trained_modle\] are not found in the "
                                             r"catalog"),
    (["--from-nodes", "build_tokenizer"],
     r"--from-nodes build_tokenizer: it reads corpus_documents \(data/02_intermediate/corpus_documents\), "
     r".*which no earlier run has written; run `kedro run --pipelines ingestion` first"),
]


@pytest.mark.parametrize(("arguments", "message"), KEDRO_MISTAKES, ids=[" ".join(c[0]) for c in KEDRO_MISTAKES])
def test_a_kedro_level_mistake_is_one_line_saying_what_to_run(project_copy, arguments, message):
    """Unknown pipelines and environments, and a pipeline run alone in a fresh clone (Kedro: "Did
    not find any versions" from the first node that loads what is missing, after a 40-80-line traceback)."""
    result = kedro_cli(project_copy, *arguments)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr + result.stdout
    last = result.stderr.strip().splitlines()[-1]
    assert re.match(rf"Error: {message}", last), last
    assert not (project_copy / "data" / "02_intermediate").exists()


CONFIGURATION_MISTAKES = [
    ("conf/smoke/parameters_mine.yml", "training:\n  max_steps: [1, 2\n",
     r"conf: Invalid YAML or JSON file .*/conf/smoke/parameters_mine\.yml, unable to read line 2"),
    ("conf/smoke/parameters_mine.yml", "tokenizer:\n  vocab_size: 500\n",
     r"conf: Duplicate keys found in .*parameters.*: tokenizer(\.vocab_size)?; an environment may set a key once"),
    ("conf/smoke/globals.yml", "corpus:\n  path: /data/corpus\n",
     r"conf/smoke/globals\.yml: globals files are not read: the corpus settings \(corpus\.path, corpus\.sources, "
     r"\.\.\.\) live in the parameters; move its keys to conf/smoke/parameters_corpus\.yml"),
    ("conf/smoke/parameters_mine.yml", "corpus:\n  split_ratios: [0.8, 0.1, 0.1]\n",
     r"conf/smoke/parameters_mine\.yml: corpus\.split_ratios is a list where conf/base/parameters_corpus\.yml has a "
     r"mapping; an environment overrides keys, so give it the same form"),
    ("conf/smoke/parameters_mine.yml", "corpus:\n  sources:\n    books: {path: a.txt}\n    books: {path: b.txt}\n",
     r"conf/smoke/parameters_mine\.yml: found duplicate key books \(line 4, column 5\)"),
]


@pytest.mark.parametrize(("path", "text", "message"), CONFIGURATION_MISTAKES, ids=[
    "broken YAML", "a key set twice", "a globals file", "a list for a mapping", "a source named twice"])
def test_a_configuration_mistake_is_one_line(project_copy, path, text, message):
    """A corpus set in globals.yml (where earlier versions kept it) trained silently on the built-in corpus; broken
    YAML was an 86-line traceback, a list where conf/base has a mapping a 77-line one naming neither file nor key."""
    (project_copy / path).write_text(text)
    result = kedro_cli(project_copy, "--pipelines", "ingestion")
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert re.match(rf"Error: {message}", last), last


def test_a_credentials_name_missing_from_the_environment_read_is_one_line(project_copy):
    """Under --env smoke, Kedro reads conf/base and conf/smoke: an entry in conf/local/credentials.yml is not seen."""
    (project_copy / "conf" / "local" / "credentials.yml").write_text("corpus_store: {key: a, secret: b}\n")
    result = kedro_cli(project_copy, "--pipelines", "ingestion", "--params", "corpus.credentials=corpus_store")
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "Error: corpus.credentials: 'corpus_store' is not an entry of the credentials (conf/base/credentials.yml and "
        "conf/smoke/credentials.yml; their entries: none); under --env smoke conf/local is not read, so an entry in "
        "conf/local/credentials.yml is not seen: copy it to conf/smoke/credentials.yml"), last
    (project_copy / "conf" / "smoke" / "credentials.yml").write_text("other: {key: a}\n")
    result = kedro_cli(project_copy, "--pipelines", "ingestion",
                       "--params", "corpus.sources.web.path=/x.txt,corpus.sources.web.credentials=nope")
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: corpus.sources.web.credentials: 'nope' is not an entry of the credentials "
                           "(conf/base/credentials.yml and conf/smoke/credentials.yml; their entries: 'other')"), last
