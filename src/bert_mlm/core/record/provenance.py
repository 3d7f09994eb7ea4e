"""Which model and run every section of a report belongs to, and "How this run was made".

A report describes one model (:func:`bert_mlm.core.record.results.reported_model`), but its sections
come from datasets that different runs may have written (a newer study, an earlier model's
fine-tuning, data stages run again after training). Each section gets one line naming the model and
the run it comes from, and a warning where its result was made for another model. The report opens
with the record of the run that trained the model (:mod:`bert_mlm.core.record.run_record`).
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bert_mlm.core.common.redaction import redact
from bert_mlm.core.evaluate.result import Evaluation
from bert_mlm.core.finetune.result import FinetuneResults
from bert_mlm.core.record.results import ModelResults
from bert_mlm.core.record.run_record import RunRecord, dotted
from bert_mlm.core.study.record import TuningRecord

OPENING = "How this run was made"
# The report's sections, by heading, and what they are made from.
SUMMARY, CORPUS, TOKENIZER, SEQUENCES = "Summary", "Corpus", "Tokenizer", "Sequences and padding efficiency"
TRAINING, TUNING, FINETUNE = "Training", "Tuning of the mask probability", "Fine-tuning on the downstream task"
EVALUATION, FILL_MASK = "Evaluation (fixed protocol)", "Fill-mask examples"


@dataclass
class Provenance:
    """``model``: the reported model's version; ``run``: this run's record; ``model_record``: that
    of the run that trained the model; per section heading a caption and maybe a warning."""

    model: str | None
    run: RunRecord | None = None
    model_record: RunRecord | None = None
    captions: dict[str, str] = field(default_factory=dict)
    warnings: dict[str, str] = field(default_factory=dict)

    def sections(self, sections: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """The report's ``sections``, opened by :data:`OPENING`, each with its line."""
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
        elif self.run is not None and self.run.run_id != record.run_id:
            notes.append(f"Model {self.model} was trained by the run below; this report was made by run "
                         f"{self.run.run_id} ({self.run.command}) from the results saved so far. Each section says "
                         "which model and run it belongs to.")
        paragraphs = "".join(f"<p>{html.escape(note)}</p>" for note in notes)
        cells = "".join(f"<tr><td>{html.escape(label)}</td><td style='text-align:left'>{html.escape(value)}</td></tr>"
                        for label, value in record_rows(record))
        sections = html.escape(json.dumps(redact(record.sections), indent=2, ensure_ascii=False, default=str))
        return (f"{paragraphs}<table>{cells}</table><details><summary>Every section as the run used it "
                f"(run_config.json of run {html.escape(str(record.run_id))})</summary><pre>{sections}</pre></details>")


def model_line(model: str | None) -> str:
    return f"Model {model}." if model else "No trained model yet."


def record_rows(record: RunRecord) -> list[tuple[str, str]]:
    """The record as labelled rows."""
    corpus, masking, training = record.corpus, record.section("masking"), record.section("training")
    params = dotted(redact(record.params))
    start = f"continued from {record.init_from}" if record.init_from else "from scratch"
    rows = [("run", f"{record.run_id} (started {record.started or '?'})"), ("command", record.command),
            ("environment (--env)", record.env or "none (conf/base and conf/local)"),
            ("--params", ", ".join(f"{k}={v}" for k, v in params.items()) or "none"),
            ("pipelines", ", ".join(record.pipelines)),
            ("model", f"trained in this run (version {record.trained_model}), {start}" if record.trained_model
             else f"none trained in this run, {start}"),
            ("corpus", f"{corpus.source or 'not recorded'} (language: {corpus.language or 'unknown'})")]
    if corpus.sources_line:
        rows.append(("sources (train split)", corpus.sources_line))
    if corpus.token_store:
        rows.append(("token store", corpus.token_store_line))
    if masking:
        origin = " (the tuning stage's resolved_masking)" if "masking" in record.sections_from_tuning else ""
        rows.append(("masking", f"probability {masking.get('probability')}, mask/random fractions "
                                f"{masking.get('mask_token_fraction')}/{masking.get('random_token_fraction')}, whole "
                                f"words {masking.get('whole_word')}{origin}"))
    if training:
        origin = " (the tuning stage's resolved_training)" if "training" in record.sections_from_tuning else ""
        rows.append(("training", ", ".join(f"{key} {training[key]}" for key in (
            "max_steps", "batch_size", "learning_rate", "warmup_steps", "seed", "precision") if key in training)
            + origin))
    return rows + [("code", record.code_line), ("software", record.software_line or "?"),
                   ("device", record.device or "?")]


def provenance(results: ModelResults, run: RunRecord | None, model_record: RunRecord | None, *,
               study: TuningRecord | None = None, finetune: FinetuneResults | None = None,
               evaluation: Evaluation | None = None, data_runs: Mapping[str, str | None] | None = None,
               history_run: str | None = None) -> Provenance:
    """The lines of every section of the report of ``results``' model: ``study``, ``finetune`` and
    ``evaluation`` are the newest saved (each knowing its run), ``data_runs`` the runs that saved
    the corpus, tokenization and sequence stats, ``history_run`` that of the training history."""
    model = results.model_version
    found = Provenance(model, run, model_record)
    trained = model_record.corpus if model_record and model_record.corpus.token_store else None
    data_runs = data_runs or {}
    for heading, key in ((CORPUS, "corpus"), (TOKENIZER, "tokenization"), (SEQUENCES, "sequences")):
        saved = data_runs.get(key)
        line = f"Data of run {saved}." if saved else "Data of an unrecorded run."
        if trained:
            store = trained.token_store.get("version")
            used = {CORPUS: trained.documents_version, TOKENIZER: store}.get(heading)
            if used is None:
                line += f" Model {model} was trained on the token store of run {store or '?'}."
            elif used == saved:
                line += f" Model {model} was trained on it."
            else:
                found.warnings[heading] = (f"model {model} was trained on the data of run {used}; these statistics "
                                           f"are of the data the run {saved} made since.")
        found.captions[heading] = line
    evaluated, finetuned = results.evaluation.version if results.evaluation else None, results.finetune.version
    found.captions[SUMMARY] = ", ".join([f"Model {model} (data/06_models/masked_lm/{model}/masked_lm)",
                                         *([f"evaluated in run {evaluated}"] if evaluated else []),
                                         *([f"fine-tuned in run {finetuned}"] if finetuned else [])]) + "." \
        if model else model_line(model)
    found.captions[TRAINING] = (f"Model {model}: its training in run {history_run}." if history_run
                                else model_line(model))
    if history_run and model and history_run != model:
        found.warnings[TRAINING] = f"these curves are of the model of run {history_run}, not of model {model}."
    for heading in (EVALUATION, FILL_MASK):
        found.captions[heading] = (
            f"Model {model}, evaluated in run {evaluated}." if evaluated else model_line(model) if not model
            else f"Model {model} has not been evaluated yet (kedro run --pipelines evaluation).")
        if not evaluated and evaluation is not None and evaluation.model_version != model:
            found.warnings[heading] = (f"the newest evaluation (run {evaluation.version}) is of model "
                                       f"{evaluation.model_version}; it is not shown.")
    _tuning(found, results, study)
    _finetuning(found, results, finetune or FinetuneResults())
    return found


def _tuning(found: Provenance, results: ModelResults, study: TuningRecord | None) -> None:
    model, training = found.model, results.training
    trained_with = training.tuning_run if training else None
    if study is None:
        found.captions[TUNING] = "No study saved."
        return
    adopted = (study.masking or {}).get("probability")
    adopted = f"{adopted:.3g}" if isinstance(adopted, float) else adopted
    what = {"tuning": f"adopted {adopted}", "variant": f"a variant at {adopted}"}.get(
        study.source, "the configured masking kept" if study.finished_trials else "no trials: tuning.n_trials=0")
    found.captions[TUNING] = f"The study of run {study.version} ({what})."
    if trained_with is None:
        return  # no training summary, or one of an earlier version: which study it trained with is not recorded
    if trained_with == study.version:
        found.captions[TUNING] += f" Model {model} was trained with it."
        return
    found.warnings[TUNING] = (
        f"this mask-rate study ({what}) was run for another model than the one reported (trained at "
        f"{training.mask_probability}, with the study of run {trained_with}); to train with it: "
        "kedro run --pipelines training,evaluation")


def _finetuning(found: Provenance, results: ModelResults, finetune: FinetuneResults) -> None:
    model = found.model
    if results.finetune:
        found.captions[FINETUNE] = f"Model {model}, fine-tuned in run {results.finetune.version}."
        return
    found.captions[FINETUNE] = f"Model {model} has no fine-tuning evaluation." if model else model_line(model)
    if finetune and finetune.model_version != model:
        found.warnings[FINETUNE] = (
            f"the newest fine-tuning result (run {finetune.version}, data/08_reporting/finetune_metrics.json/"
            f"{finetune.version}/) was made for model {finetune.model_version or 'not recorded'}; it is not shown "
            f"beside model {model}. Fine-tune this model: kedro run --pipelines finetune --params "
            "finetune.train_path=...")
