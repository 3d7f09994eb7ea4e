"""Every form a setting accepts is one the whole chain runs with: a value the configuration takes
must not fail at the end of a long run (a list of ``corpus.sources``, which the configuration
accepted, once failed in ``record_run`` after every stage had run).

The defaults and ``conf/smoke`` run one form of each union-typed setting in every other session
test; this run sets the other forms, all at once, through the smoke chain to its report."""

from __future__ import annotations

import json

import yaml

from bert_mlm.config import ExperimentConfig
from tests.kedro_runs import latest, run_session

# Each union-typed setting in the form conf/base and conf/smoke do not use.
OTHER_FORMS = {
    "corpus.line_by_line": True,  # auto | bool
    "tokenizer.strip_accents": True,  # null | bool
    "tokenizer.limit_alphabet": 400,  # null | int
    "tokenizer.training_sample_bytes": 1_000_000,  # null | int (the built-in corpus is ~1.7 MB: a sample)
    "training.max_steps": None,  # int | null, with
    "training.epochs": 0.5,  # null | float
    "training.learning_rate": 0.003,  # auto | float
    "training.warmup_steps": 1,  # auto | int (smoke: int; base: auto)
    "training.max_grad_norm": None,  # float | null
    "training.record_every": 2,  # auto | int
    "training.eval_every": 3,  # 0 | int
    "training.threads": 1,  # auto | int
    "training.checkpoint_dir": None,  # str | null (checkpoint_every then 0)
    "training.checkpoint_every": 0,
    "evaluation.min_masked_tokens": None,  # int | null: the whole test split
    "evaluation.fill_mask_sentences": ["The [MASK] is returned.", "Return the [MASK] of a list."],  # null | list
    "tuning.eval_max_sequences": 8,  # null | int
    "data.workers": 1,  # null | int
}


def test_the_other_form_of_every_union_setting_runs_the_chain_to_its_report(project_copy, monkeypatch):
    parameters = {}
    for dotted, value in OTHER_FORMS.items():
        section, key = dotted.split(".")
        parameters.setdefault(section, {})[key] = value
    ExperimentConfig.from_parameters(parameters)  # every form is one the configuration accepts
    smoke = project_copy / "conf" / "smoke" / "parameters.yml"
    merged = yaml.safe_load(smoke.read_text())  # one environment sets a section in one file
    for section, values in parameters.items():
        merged.setdefault(section, {}).update(values)
    smoke.write_text(yaml.safe_dump(merged))
    # Batches of 32, not smoke's 8: half an epoch is 13 steps, validated 4 times (every 3), not 49 steps validated 16
    # times; the batch size is no union-typed setting.
    run_session(project_copy, monkeypatch, **{"training.batch_size": 32})
    metrics = json.loads(latest(project_copy / "data" / "08_reporting" / "metrics.json").read_text())
    assert metrics["train_steps"] > 0 and metrics["eval_masked_tokens"] > 0
    assert [example["sentence"] for example in metrics["fill_mask_examples"]] == OTHER_FORMS[
        "evaluation.fill_mask_sentences"]
    assert latest(project_copy / "data" / "08_reporting" / "run_report.html").stat().st_size > 10_000
    record = json.loads(latest(project_copy / "data" / "08_reporting" / "run_config.json").read_text())
    assert record["sections"]["training"]["epochs"] == 0.5 and record["sections"]["corpus"]["line_by_line"] is True
