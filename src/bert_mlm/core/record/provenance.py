"""Which model and run every section of a report belongs to, and "How this run was made".

A report describes one model (:func:`bert_mlm.core.record.results.reported_model`). Its sections come
from datasets that different runs may have written: ``kedro run --pipelines tuning`` saves a newer
study than the one the model trained with, a run without ``finetune.train_path`` fine-tunes
nothing and leaves an earlier model's result as the newest, the data stages may run again after
training. Each section gets one line naming the model and the run it comes from, and a warning
where its result was made for another model than the one reported ("this mask-rate study (adopted
0.355) was run for another model than the one reported (trained at 0.15)"). The report opens with
the record of the run that trained the model (:mod:`bert_mlm.core.record.run_record`).
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bert_mlm.core.common.redaction import redact
from bert_mlm.core.record.run_record import (
    command_line,
    describe_code,
    describe_software,
    dotted,
    sources_line,
    token_store_line,
)

OPENING = "How this run was made"
# The report's sections, by heading, and what they are made from.
SUMMARY, CORPUS, TOKENIZER, SEQUENCES = "Summary", "Corpus", "Tokenizer", "Sequences and padding efficiency"
TRAINING, TUNING, FINETUNE = "Training", "Tuning of the mask probability", "Fine-tuning on the downstream task"
EVALUATION, FILL_MASK = "Evaluation (fixed protocol)", "Fill-mask examples"


@dataclass
class Provenance:
    """``model``: the reported model's version; ``run``: this run's record; ``model_record``: the
    record of the run that trained the model (None where there is none); per section heading a
    ``captions`` line and, where its result belongs to another model, a ``warnings`` line."""

    model: str | None
    run: Mapping[str, Any] | None = None
    model_record: Mapping[str, Any] | None = None
    captions: dict[str, str] = field(default_factory=dict)
    warnings: dict[str, str] = field(default_factory=dict)

    def sections(self, sections: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """The report's ``sections``, opened by :data:`OPENING`, each with its line (sections this
        module does not know are the model's)."""
        return [(OPENING, self.opening()), *((heading, self._caption(heading) + content)
                                             for heading, content in sections)]

    def _caption(self, heading: str) -> str:
        caption = self.captions.get(heading, model_line(self.model))
        warning = self.warnings.get(heading)
        shown = f'<p class="belongs">{html.escape(caption)}</p>'
        if warning:
            shown += f'<p class="mismatch"><b>Not this model\'s:</b> {html.escape(warning)}</p>'
        return shown

    def opening(self) -> str:
        record = self.model_record or self.run
        if record is None:
            return '<p class="muted">No run record (this run did not save one).</p>'
        notes = []
        if self.model_record is None and self.model is not None:
            notes.append(f"No record of the run that trained model {self.model} (it was trained before bert-mlm "
                         "recorded its runs, or that version of run_config was deleted); this run's record follows.")
        elif self.run is not None and self.run.get("run_id") != record.get("run_id"):
            notes.append(f"Model {self.model} was trained by the run below; this report was made by run "
                         f"{self.run.get('run_id')} ({self.run.get('command') or command_line(self.run)}) from the "
                         "results saved so far. Each section says which model and run it belongs to.")
        paragraphs = "".join(f"<p>{html.escape(note)}</p>" for note in notes)
        return paragraphs + record_table(record) + record_details(record)


def model_line(model: str | None) -> str:
    return f"Model {model}." if model else "No trained model yet."


def record_rows(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The record as labelled rows (redacted)."""
    record = redact(dict(record))
    sections = record.get("sections") or {}
    corpus = record.get("corpus") or {}
    masking, training = sections.get("masking") or {}, sections.get("training") or {}
    from_tuning = set(record.get("sections_from_tuning") or ())
    params = dotted(record.get("params") or {})
    rows = [
        ("run", f"{record.get('run_id')} (started {record.get('started')})"),
        ("command", record.get("command") or command_line(record)),
        ("environment (--env)", str(record.get("env"))),
        ("--params", ", ".join(f"{k}={v}" for k, v in params.items()) or "none"),
        ("pipelines", ", ".join(record.get("pipelines") or ())),
        ("model", (f"trained in this run (version {record['trained_model']}), " if record.get("trained_model")
                   else "none trained in this run, ")
         + (f"continued from {record['init_from']}" if record.get("init_from") else "from scratch")),
        ("corpus", f"{corpus.get('source', 'not recorded')} (language: {corpus.get('language') or 'unknown'})"),
    ]
    if sources_line(corpus):
        rows.append(("sources (train split)", sources_line(corpus)))
    if corpus.get("token_store"):
        rows.append(("token store", token_store_line(corpus)))
    if masking:
        origin = " (the tuning stage's resolved_masking)" if "masking" in from_tuning else ""
        rows.append(("masking", f"probability {masking.get('probability')}, mask/random fractions "
                                f"{masking.get('mask_token_fraction')}/{masking.get('random_token_fraction')}, whole "
                                f"words {masking.get('whole_word')}{origin}"))
    if training:
        origin = " (the tuning stage's resolved_training)" if "training" in from_tuning else ""
        rows.append(("training", ", ".join(f"{key} {training[key]}" for key in (
            "max_steps", "batch_size", "learning_rate", "warmup_steps", "seed", "precision") if key in training)
            + origin))
    rows += [("code", describe_code(record.get("code"))), ("software", describe_software(record.get("software"))),
             ("device", str(record.get("device")))]
    return rows


def record_table(record: Mapping[str, Any]) -> str:
    cells = "".join(f"<tr><td>{html.escape(label)}</td><td style='text-align:left'>{html.escape(value)}</td></tr>"
                    for label, value in record_rows(record))
    return f"<table>{cells}</table>"


def record_details(record: Mapping[str, Any]) -> str:
    sections = json.dumps(redact(dict(record.get("sections") or {})), indent=2, ensure_ascii=False, default=str)
    return (f"<details><summary>Every section as the run used it (run_config.json of run "
            f"{html.escape(str(record.get('run_id')))})</summary><pre>{html.escape(sections)}</pre></details>")


def provenance(metrics: Mapping[str, Any], run: Mapping[str, Any] | None, model_record: Mapping[str, Any] | None,
               *, study: Any = None, study_run: str | None = None, finetune: Mapping[str, Any] | None = None,
               finetune_run: str | None = None, evaluation_model: str | None = None,
               evaluation_run: str | None = None, data_runs: Mapping[str, str | None] | None = None,
               history_run: str | None = None) -> Provenance:
    """The lines of every section of the report of ``metrics``' model (``metrics.json``).

    ``study``: the newest tuning record (its ``version``: ``study_run``); ``finetune``: the newest
    fine-tuning result (saved in ``finetune_run``); ``evaluation_model``/``evaluation_run``: the
    newest evaluation's model and run; ``data_runs``: the runs that saved the corpus, tokenization
    and sequence stats; ``history_run``: the run that saved the training history."""
    model = metrics.get("model_version")
    found = Provenance(model, run, model_record)
    trained = model_record.get("corpus") if model_record else None
    data_runs = data_runs or {}
    for heading, key, what in ((CORPUS, "corpus", "documents_version"), (TOKENIZER, "tokenization", None),
                               (SEQUENCES, "sequences", None)):
        saved = data_runs.get(key)
        line = f"Data of run {saved}." if saved else "Data of an unrecorded run."
        if trained:
            used = trained.get(what) if what else (trained.get("token_store") or {}).get("version")
            if key == "sequences" or used is None:
                line += f" Model {model} was trained on the token store of run " \
                        f"{(trained.get('token_store') or {}).get('version', '?')}."
            elif used == saved:
                line += f" Model {model} was trained on it."
            else:
                found.warnings[heading] = (f"model {model} was trained on the data of run {used}; these statistics "
                                           f"are of the data the run {saved} made since.")
        found.captions[heading] = line
    found.captions[SUMMARY] = summary_line(metrics)
    found.captions[TRAINING] = (f"Model {model}: its training in run {history_run}." if history_run
                                else model_line(model))
    if history_run and model and history_run != model:
        found.warnings[TRAINING] = f"these curves are of the model of run {history_run}, not of model {model}."
    evaluated = metrics.get("evaluated_in_run")
    for heading in (EVALUATION, FILL_MASK):
        found.captions[heading] = (f"Model {model}, evaluated in run {evaluated}." if evaluated
                                   else f"Model {model} has not been evaluated yet (kedro run --pipelines evaluation).")
        if not evaluated and evaluation_run and evaluation_model != model:
            found.warnings[heading] = (f"the newest evaluation (run {evaluation_run}) is of model {evaluation_model}; "
                                       "it is not shown.")
    _tuning(found, metrics, study, study_run)
    _finetuning(found, metrics, finetune or {}, finetune_run)
    return found


def summary_line(metrics: Mapping[str, Any]) -> str:
    model = metrics.get("model_version")
    if not model:
        return model_line(model)
    parts = [f"Model {model} (data/06_models/masked_lm/{model}/masked_lm)"]
    if metrics.get("evaluated_in_run"):
        parts.append(f"evaluated in run {metrics['evaluated_in_run']}")
    if metrics.get("finetuned_in_run"):
        parts.append(f"fine-tuned in run {metrics['finetuned_in_run']}")
    return ", ".join(parts) + "."


def _tuning(found: Provenance, metrics: Mapping[str, Any], study: Any, study_run: str | None) -> None:
    model, trained_with = found.model, metrics.get("tuning_run")
    if study is None:
        found.captions[TUNING] = "No study saved."
        return
    adopted = (study.masking or {}).get("probability")
    adopted = f"{adopted:.3g}" if isinstance(adopted, float) else adopted
    what = {"tuning": f"adopted {adopted}", "variant": f"a variant at {adopted}"}.get(
        study.source, "the configured masking kept" if study.finished_trials else "no trials: tuning.n_trials=0")
    found.captions[TUNING] = f"The study of run {study_run} ({what})."
    if trained_with is None and "tuning_run" not in metrics:
        return  # a model of an earlier version: which study it trained with is not recorded
    if trained_with == study_run:
        found.captions[TUNING] += f" Model {model} was trained with it."
        return
    trained_at = metrics.get("mask_probability")
    found.warnings[TUNING] = (
        f"this mask-rate study ({what}) was run for another model than the one reported (trained at {trained_at}"
        + (f", with the study of run {trained_with}" if trained_with else "") + "); to train with it: "
        "kedro run --pipelines training,evaluation")


def _finetuning(found: Provenance, metrics: Mapping[str, Any], finetune: Mapping[str, Any],
                finetune_run: str | None) -> None:
    model = found.model
    if metrics.get("finetuned_in_run"):
        found.captions[FINETUNE] = f"Model {model}, fine-tuned in run {metrics['finetuned_in_run']}."
        return
    found.captions[FINETUNE] = f"Model {model} has no fine-tuning evaluation."
    other = finetune.get("finetune_model_version")
    if finetune.get("finetune_summary") and other != model:
        found.warnings[FINETUNE] = (
            f"the newest fine-tuning result (run {finetune_run}, data/08_reporting/finetune_metrics.json/"
            f"{finetune_run}/) was made for model {other or 'not recorded'}; it is not shown beside model {model}. "
            "Fine-tune this model: kedro run --pipelines finetune --params finetune.train_path=...")
