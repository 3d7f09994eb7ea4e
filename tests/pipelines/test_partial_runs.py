"""Real Kedro sessions in the smoke env: every run's record, the model card, and partial runs that
keep each result with the model it was made for (issue 35, items 4 and 5)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from huggingface_hub import ModelCard as HubCard
from transformers import AutoModelForMaskedLM, AutoTokenizer

from tests.kedro_runs import kedro_cli, latest, run_session
from tests.pipelines.test_session_runs import finetune_params, labelled_task  # noqa: F401 - a fixture

# Small enough for seconds per run: few steps and mask draws, no study unless asked for.
QUICK = {"tuning.n_trials": 0, "training.max_steps": 4, "evaluation.mask_draws": 2}


def versions(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) if folder.is_dir() else []


def read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def sections(report: str) -> dict[str, str]:
    """Each section's HTML by its heading, in order."""
    parts = re.split(r"<h2>(.*?)</h2>", report)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def belongs_line(content: str) -> str:
    assert content.startswith('<p class="belongs">'), content[:200]
    return content.split("</p>", 1)[0]


@pytest.mark.slow
def test_partial_runs_keep_every_result_with_its_model(smoke_chain_copy, monkeypatch, labelled_task):  # noqa: F811
    """Full run with fine-tuning (A: the shared smoke chain's, in a copy), full run without (B),
    `--pipelines reporting` (C): A's fine-tuning result stays the newest version and the latest for
    its model, and no report puts it beside model B. Then `--pipelines finetune` (D) refreshes
    metrics.json, the report and the card of model B and prints where they are; `--pipelines tuning`
    (E) saves a study that the report names as not model B's."""
    project, data = smoke_chain_copy, smoke_chain_copy / "data"
    (model_a,) = versions(data / "06_models" / "masked_lm")
    finetune_a = read(latest(data / "08_reporting" / "finetune_metrics.json"))
    assert finetune_a["finetune_model_version"] == model_a

    # The run record of A: the sections as trained, --env, --params, pipelines, corpus and token store, code.
    record = read(latest(data / "08_reporting" / "run_config.json"))
    assert record["run_id"] == record["trained_model"] == model_a and record["env"] == "smoke"
    assert record["params"]["training"]["eval_every"] == 5 and record["pipelines"] == ["__default__"]
    tuned = read(latest(data / "07_model_output" / "resolved_masking.json"))["probability"]
    assert record["sections"]["masking"]["probability"] == tuned and record["sections_from_tuning"] == ["masking"]
    assert record["corpus"]["source"] == "built-in corpus" and record["corpus"]["language"] == "en"
    assert record["corpus"]["token_store"]["version"] == model_a
    assert set(record["corpus"]["token_store"]["digests"]) == {"train", "valid", "test", "vocabulary"}
    assert record["init_from"] is None and record["code"]["version"] and record["software"]["transformers"]
    assert record["device"] == "cpu" and record["command"].startswith("kedro run --env smoke --params ")
    metrics_a = read(latest(data / "08_reporting" / "metrics.json"))
    assert metrics_a["model_version"] == metrics_a["finetuned_in_run"] == model_a
    assert metrics_a["parameter_count"] > 0 and "parameters" not in metrics_a
    report_a = latest(data / "08_reporting" / "run_report.html").read_text()
    assert next(iter(sections(report_a))) == "How this run was made" and record["command"] in report_a

    # The model card: front matter the Hub parses, the run's facts; plain transformers ignores it.
    folder = latest(data / "06_models" / "masked_lm")
    card = (folder / "README.md").read_text(encoding="utf-8")
    hub = HubCard(card)
    assert hub.data.language == "en" and hub.data.license == "unknown" and "masked-lm" in hub.data.tags
    assert "## Fine-tuning" in card and "| steps | 12 |" in card and model_a in card
    assert AutoModelForMaskedLM.from_pretrained(folder).config.hidden_size == 32
    assert AutoTokenizer.from_pretrained(folder).mask_token == "[MASK]"

    # B: no fine-tuning, so no (empty) fine-tuning result over A's.
    run_session(project, monkeypatch, **QUICK)
    model_b = versions(data / "06_models" / "masked_lm")[-1]
    for name in ("08_reporting/finetune_metrics.json", "08_reporting/finetune_runs.csv",
                 "06_models/finetune_label_mapping.json", "06_models/finetuned_classifier"):
        assert versions(data / name) == [model_a], name
    metrics_b = read(latest(data / "08_reporting" / "metrics.json"))
    assert metrics_b["model_version"] == model_b and not any(k.startswith("finetune") for k in metrics_b)

    # C: `--pipelines reporting`: the report of model B says which model every section belongs to.
    run_session(project, monkeypatch, pipeline_name="reporting")
    assert read(latest(data / "08_reporting" / "finetune_metrics.json"))["finetune_model_version"] == model_a
    report_c = sections(latest(data / "08_reporting" / "run_report.html").read_text())
    assert list(report_c)[0] == "How this run was made"
    assert f"Model {model_b} was trained by the run below; this report was made by run" in report_c[
        "How this run was made"]
    for heading, content in list(report_c.items())[1:]:
        line = belongs_line(content)
        assert model_b in line or heading == "Tuning of the mask probability", heading
    finetune_c = report_c["Fine-tuning on the downstream task"]
    assert f"Model {model_b} has no fine-tuning evaluation" in finetune_c
    assert f"was made for model {model_a}; it is not shown beside model {model_b}" in finetune_c
    assert finetune_a["finetune_summary"] not in finetune_c
    assert "## Fine-tuning" not in (latest(data / "06_models" / "masked_lm") / "README.md").read_text()

    # D: `--pipelines finetune` refreshes metrics.json, the report and the card of model B, and says where.
    params = ",".join(f"{k}={v}" for k, v in finetune_params(labelled_task, **{"finetune.seeds": 1}).items())
    result = kedro_cli(project, "--pipelines", "finetune", "--params", params)
    assert result.returncode == 0, result.stderr[-3000:]
    run_d = versions(data / "08_reporting" / "finetune_metrics.json")[-1]
    for label, path in (("fine-tuning", f"finetune_metrics.json/{run_d}/"), ("metrics", f"metrics.json/{run_d}/"),
                        ("model card", f"masked_lm/{model_b}/masked_lm/README.md"),
                        ("report", f"run_report.html/{run_d}/"), ("run record", f"run_config.json/{run_d}/")):
        assert re.search(rf"bert_mlm\.hooks:   {label} +\S*{re.escape(path)}", result.stdout), label
    metrics_d = read(latest(data / "08_reporting" / "metrics.json"))
    assert metrics_d["model_version"] == model_b and metrics_d["finetuned_in_run"] == run_d
    assert metrics_d["eval_loss"] == metrics_b["eval_loss"]  # B's evaluation, not run again
    report_d = sections(latest(data / "08_reporting" / "run_report.html").read_text())
    assert belongs_line(report_d["Fine-tuning on the downstream task"]).endswith(
        f"Model {model_b}, fine-tuned in run {run_d}.")
    assert "mismatch" not in report_d["Fine-tuning on the downstream task"]
    assert "## Fine-tuning" in (latest(data / "06_models" / "masked_lm") / "README.md").read_text()
    assert versions(data / "08_reporting" / "finetune_metrics.json") == [model_a, run_d]

    # E: `--pipelines tuning` saves a study no model has trained with yet: named as not model B's.
    run_session(project, monkeypatch, pipeline_name="tuning",
                **{"tuning.n_trials": 1, "tuning.trial_steps": 2, "tuning.eval_every": 2})
    tuning = sections(latest(data / "08_reporting" / "run_report.html").read_text())["Tuning of the mask probability"]
    assert re.search(r"this mask-rate study \(adopted 0\.\d+\) was run for another model than the one reported "
                     r"\(trained at 0\.15", tuning)
