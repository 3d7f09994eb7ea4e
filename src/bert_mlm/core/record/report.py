"""Run reports: one self-contained HTML page (tables, and PNG figures embedded inline) that a
person can open from ``data/08_reporting`` in any browser, mail, or attach to a ticket. The
results are read by attribute (:class:`~bert_mlm.core.record.results.ModelResults`); the figures
are :mod:`bert_mlm.core.record.figures`'."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone

import pandas as pd

from bert_mlm.core.common.formatting import format_value, with_error
from bert_mlm.core.common.text import cjk_characters, readable_spacing
from bert_mlm.core.evaluate.result import Evaluation
from bert_mlm.core.finetune.result import FinetuneResults, TaskResult, gained, paired_differences
from bert_mlm.core.record import provenance as heading  # the sections' headings, which provenance captions
from bert_mlm.core.record.figures import comparison_figure, finetune_curves, image, training_curves, tuning_curve
from bert_mlm.core.record.provenance import Provenance
from bert_mlm.core.record.results import COMPARED, ModelResults, evaluation_rows
from bert_mlm.core.train.result import TrainingSummary

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "Helvetica Neue", Arial,
  "Noto Sans CJK SC", "Source Han Sans SC", "PingFang SC", "Hiragino Sans GB", "Microsoft YaHei",
  "WenQuanYi Micro Hei", "Noto Sans CJK JP", "Noto Sans CJK KR", sans-serif; margin: 2rem auto; max-width: 70rem;
  color: #222; }
code { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, "Noto Sans Mono CJK SC", monospace; }
h1 { margin-bottom: 0.2rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.6rem 0; font-size: 0.9rem; }
td, th { border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: right; }
th { background: #f4f4f4; } td:first-child, th:first-child { text-align: left; }
img { max-width: 100%; } .muted { color: #666; } code { background: #f4f4f4; padding: 0 0.2rem; }
.belongs { color: #555; font-style: italic; } .mismatch { background: #fff4e0; border-left: 4px solid #e69500;
  padding: 0.3rem 0.6rem; } details pre { background: #f8f8f8; padding: 0.5rem; font-size: 0.8rem; }
"""


def table(frame: pd.DataFrame | None, float_format: str = "{:,.4f}") -> str:
    return '<p class="muted">Nothing recorded.</p>' if frame is None or frame.empty else \
        _counts_with_gaps(frame).to_html(index=False, border=0, float_format=float_format.format, na_rep="")


def _counts_with_gaps(frame: pd.DataFrame) -> pd.DataFrame:
    """Counts given on some rows only (``corpus_stats``' totals) read back from CSV as floats, or
    held as ``Int64``: shown as counts, with empty cells (not ``2.0000`` and ``<NA>``)."""
    frame = frame.copy()
    for column in frame.columns:
        values = frame[column]
        if not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values) or not values.isna().any():
            continue
        present = values.dropna()
        if len(present) and (present.astype(float) % 1 == 0).all():
            frame[column] = ["" if pd.isna(value) else f"{int(value):,}" for value in values]
    return frame


def tuning_decision(training: TrainingSummary | None) -> str:
    return (training.tuning_decision if training is not None else None) or "n/a"


def finetune_rows(task: TaskResult, named: bool = False) -> list[tuple[str, str]]:
    name, metric = f" ({task.key})" if named else "", label(task.metric)
    rows = [(f"fine-tuning{name}", task.summary),
            (f"fine-tuned {metric}{name}", with_error(task.score.mean, task.score.se))]
    if task.baseline_score is not None and task.gain is not None:
        rows += [(f"fine-tuned {metric} of the starting point{name}",
                  with_error(task.baseline_score.mean, task.baseline_score.se)),
                 (f"fine-tuning gain ({metric}){name}", with_error(task.gain.mean, task.gain.se))]
    return rows + [(f"fine-tuned {label(other)}{name}", with_error(score.mean, score.se))
                   for other, score in task.scores.items() if other != task.metric]


def headline_table(results: ModelResults) -> pd.DataFrame:
    """The headline numbers, in the order a reader looks for them."""
    evaluation, training = results.evaluation, results.training
    rows = evaluation_rows(evaluation) if evaluation is not None else []
    for task in results.finetune:
        rows += finetune_rows(task, named=len(results.finetune) > 1)
    if training is not None:
        rows += [("training mask probability", format_value(training.mask_probability)),
                 ("mask probability from", format_value(training.mask_probability_source)),
                 ("tuning decision", tuning_decision(training)),
                 ("training steps", format_value(training.train_steps)),
                 ("training tokens", format_value(training.train_tokens)),
                 ("training tokens/s", format_value(training.train_tokens_per_second)),
                 ("training seconds", format_value(training.train_seconds)),
                 ("device", format_value(training.device)), ("precision", format_value(training.precision)),
                 ("model parameters (count)", format_value(training.parameter_count))]
    if evaluation is not None:
        rows.append(("masked tokens scored (± is one standard error)", format_value(evaluation.test.masked_tokens)))
    return pd.DataFrame(rows, columns=["metric", "value"])


def continued_pretraining_summary(evaluation: Evaluation | None) -> str:
    """The before/after sentences of continued pretraining (``model.init_from``), when there are."""
    sentences = evaluation.change_summaries if evaluation is not None else []
    if not sentences:
        return ""
    items = "".join(f"<li><b>{html.escape(sentence[0].upper() + sentence[1:])}</b>.</li>" for sentence in sentences)
    return (f"<ul>{items}</ul><p class='muted'>Both models scored on the same masked tokens; ± is the paired "
            "standard error of the change.</p>")


def evaluation_table(evaluation: Evaluation | None) -> pd.DataFrame:
    """What the summary's numbers rest on: the held-out data scored, the protocol, the reference's
    token, and the extra corpus's results."""
    if evaluation is None:
        return pd.DataFrame(columns=["", "value"])
    test, extra = evaluation.test, evaluation.extra
    scored = f"{test.sequences:,} of {test.held_out_sequences:,} sequences" if test.held_out_sequences else ""
    words = "whole words" if evaluation.whole_word else "tokens"
    rows = [("held-out data scored", ", ".join(part for part in (
                f"the {evaluation.split} split", scored, f"{test.masked_tokens:,} masked tokens",
                f"{test.mask_draws} mask draw(s)" if test.mask_draws else "") if part)),
            ("protocol", f"{evaluation.mask_probability:.0%} of the {words} masked (80/10/10), fixed seed "
                         f"{evaluation.seed}: every model scored on the same masks"),
            ("most-frequent-token reference", f"always predicting {evaluation.baseline_token!r}: accuracy "
                                              f"{format_value(test.baseline_accuracy)}")]
    if extra is not None:
        rows += [("evaluation.corpus_path", str(evaluation.extra_corpus_path or "the extra corpus")),
                 ("  masked-token loss", with_error(extra.loss, extra.loss_se)),
                 ("  accuracy (top-1)", with_error(extra.accuracy, extra.accuracy_se)),
                 ("  top-5 accuracy", with_error(extra.top5_accuracy, extra.top5_accuracy_se)),
                 ("  most-frequent-token reference", format_value(extra.baseline_accuracy)),
                 ("  masked tokens scored", format_value(extra.masked_tokens))]
    return pd.DataFrame(rows, columns=["", "value"])


def fill_mask_list(examples: Sequence[Mapping]) -> str:
    if not examples:
        return '<p class="muted">No fill-mask sentences.</p>'
    items = []
    for example in examples:
        fills = ", ".join(
            f"<code>{html.escape(str(p['token']))}</code> {p['score']:.3f}" for p in example.get("predictions", [])
        )
        truth = ""
        if "answer" in example:
            rank = example.get("answer_rank")
            place = f"rank {rank}" if rank else f"not in the top {len(example.get('predictions', []))}"
            answer = html.escape(str(example["answer"]))
            truth = f' <span class="muted">(true word <code>{answer}</code>, {place})</span>'
        sentence = readable_spacing(str(example["sentence"]))
        lang = ' lang="zh"' if cjk_characters(sentence) else ""  # CJK glyphs for Chinese, not Japanese ones
        items.append(f"<li{lang}>{html.escape(sentence)} &rarr; {fills}{truth}</li>")
    return "<ul>" + "".join(items) + "</ul>"


def page(title: str, sections: Sequence[tuple[str, str]], subtitle: str = "") -> str:
    body = "".join(f"<h2>{html.escape(heading)}</h2>{content}" for heading, content in sections)
    created = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>"
            f"<p class='muted'>{html.escape(subtitle)} Created {created}.</p>{body}</body></html>\n")


def validation_note(training: TrainingSummary | None) -> str:
    """One sentence under the training curves: how the run validated and which step it kept."""
    if training is None or not training.eval_every or training.final_valid_loss is None:
        return ""
    note = (f"Validated every {training.eval_every:,} steps on {training.valid_masked_tokens:,} masked tokens of "
            f"the valid split ({training.valid_share:.1%} of training time); lowest validation loss "
            f"{training.best_valid_loss:.4f} at step {training.best_valid_step:,}, last "
            f"{training.final_valid_loss:.4f}.")
    if training.keep_best:
        note += f" training.keep_best: the model saved is step {training.kept_step:,}'s."
    return f"<p>{html.escape(note)}</p>"


def finetune_table(task: TaskResult) -> pd.DataFrame | None:
    """Per seed: the pretrained model's and its baselines' scores, and the headline's differences."""
    if not task.seeds:
        return None
    headline = label(task.metric)
    frame = pd.DataFrame({"seed": task.seeds, **{label(name): score.seeds for name, score in task.scores.items()}})
    compared = {"baseline": task.baseline_scores, **{name: other.scores for name, other in task.others.items()}}
    for which, scores in compared.items():
        if scores:
            frame = frame.assign(**{f"{which} {label(name)}": score.seeds for name, score in scores.items()})
            frame[f"{headline} gain over {which}"] = frame[headline] - frame[f"{which} {headline}"]
    return frame


def label(metric: str) -> str:
    """``macro_f1`` -> ``macro-F1``, ``entity_f1`` -> ``entity-F1``."""
    return metric.replace("_", "-").replace("f1", "F1")


def finetune_overview(task: TaskResult) -> pd.DataFrame:
    """The pretrained model, its baselines and the majority class side by side: whether both
    models sit at 55 % or at 85 % says what a gain of a point means."""
    others = [name for name in task.scores if name != task.metric]

    def row(title: str, scores: Mapping) -> tuple:
        score = scores[task.metric]
        return (title, with_error(score.mean, score.se),
                *(format_value(scores[name].mean) if name in scores else "" for name in others))

    def gain_row(title: str, gain) -> tuple:
        return (title, gained(gain), *([""] * len(others)))

    rows = [row("pretrained model", task.scores)]
    if task.baseline_score is not None:
        rows.append(row(f"starting point: {task.baseline or 'baseline'}", task.baseline_scores))
    if task.gain is not None:
        rows.append(gain_row("gain (points)", task.gain))
    for other in task.others.values():
        rows += [row(f"baseline: {other.baseline}", other.scores), gain_row("gain over it (points)", other.gain)]
    if task.majority_accuracy is not None:
        rows.append(("majority class (always the most frequent training label)",
                     format_value(task.majority_accuracy), *([""] * len(others))))
    return pd.DataFrame(rows, columns=["", f"{task.metric} (mean over seeds)", *map(label, others)])


def finetune_section(finetune: FinetuneResults, runs: pd.DataFrame | None) -> str:
    if not finetune:
        return '<p class="muted">No fine-tuning evaluation (set finetune.train_path or finetune.tasks).</p>'
    parts = []
    for task in finetune:
        unit = "sentences" if task.kind == "token" else "examples"
        majority = f"; majority class {format_value(task.majority_accuracy)}" if task.majority_accuracy else ""
        earlier = f" (fine-tuned in run {task.run})" if task.run and task.run != finetune.version else ""
        per_type = task.detail.get("entity_f1_per_type")  # a token task's, by model: its entity types' F1
        parts += [f"<h3>{html.escape(task.key)}</h3>" if len(finetune) > 1 else "",
                  f"<p><b>{html.escape(task.summary)}</b>.</p>",
                  f"<p class='muted'>{format_value(task.train_examples)} training and "
                  f"{format_value(task.eval_examples)} eval {unit} of {html.escape(str(task.dataset))} "
                  f"({task.kind} classification){majority}{html.escape(earlier)}.</p>",
                  table(finetune_overview(task)),
                  table(pd.DataFrame([{"model": model, **f1} for model, f1 in per_type.items()])) if per_type else "",
                  table(finetune_table(task)),
                  image(finetune_curves(None if earlier else runs, task.majority_accuracy, task.metric, task.task),
                        "fine-tuning curves")]
    return "".join(parts)


def vocabulary_note(coverage: Mapping | None) -> str:
    """An inherited vocabulary's [UNK] rate on the training text, what it lacked, and what was added."""
    if not coverage:
        return ""
    parts = [f"The inherited vocabulary ({coverage['inherited_tokens']:,} tokens, from "
             f"<code>{html.escape(str(coverage['source']))}</code>) turns {coverage['unknown_rate']:.3%} of the "
             f"training text's tokens into [UNK] ({coverage['unknown_tokens']:,} of {coverage['measured_tokens']:,})."]
    if coverage.get("uncovered_characters"):
        listed = ", ".join(f"<code>{html.escape(str(token))}</code> x{count:,}"
                           for token, count in coverage["uncovered_characters"])
        parts.append(f"Commonest missing: {listed}.")
    if coverage.get("added_tokens"):
        shown = ", ".join(f"<code>{html.escape(token)}</code>" for token in coverage["added"][:20])
        parts.append(f"tokenizer.extend_vocabulary added {coverage['added_tokens']:,} tokens ({shown}"
                     f"{', ...' if coverage['added_tokens'] > 20 else ''}); [UNK] rate after: "
                     f"{coverage['unknown_rate_after']:.3%}.")
    elif coverage["unknown_rate"] > coverage["warning_rate"]:
        parts.append("Above tokenizer.unk_warning_rate: set tokenizer.extend_vocabulary to add the missing tokens.")
    return f"<p>{' '.join(parts)}</p>"


# ----------------------------------------------------------------------------- reports
def run_report(results: ModelResults, training_history: pd.DataFrame, corpus_stats: pd.DataFrame | None = None,
               tokenization_stats: pd.DataFrame | None = None, sequence_stats: pd.DataFrame | None = None,
               tuning_trials: pd.DataFrame | None = None, finetune_runs: pd.DataFrame | None = None,
               vocabulary_coverage: Mapping | None = None, provenance: Provenance | None = None) -> str:
    """The report of one `kedro run`, a section per stage. With ``provenance``, it opens with how
    the model's run was made, and every section says which model and run it belongs to."""
    evaluation, training = results.evaluation, results.training
    # A mixture's sources: setting, stored sequences and each source's share of an epoch, counted on the
    # drawn index (the weights apply when training samples, not in the stored data).
    mixture = [{"source": name, **values} for name, values in ((training.mixture if training else None) or {}).items()]
    # A study by fine-tuning records its trials' scores (attr_finetune_accuracy before token tasks).
    by_finetuning = tuning_trials is not None and bool({"attr_finetune_score", "attr_finetune_accuracy"}
                                                        & set(tuning_trials.columns))
    continued = tuning_trials is not None and "values_1" in tuning_trials  # two objectives: a Pareto front
    trial_labels = {"number": "trial", "state": "state", "params_probability": "mask probability",
                    "params_replay_share": "replay share", "params_learning_rate": "learning rate",
                    "value": "fine-tuning error" if by_finetuning else "eval loss",
                    "values_0": "domain loss change", "attr_domain_change_se": "± (paired)",
                    "values_1": "general-text loss change (forgetting)", "attr_general_change_se": "± (paired) ",
                    "pareto": "on the Pareto front", "attr_seed_spread": "spread over seeds",
                    "last_intermediate_value": "last reported value", "duration_seconds": "seconds"}
    trial_columns = [c for c in trial_labels if tuning_trials is not None and c in tuning_trials
                     and tuning_trials[c].notna().any()]
    sections = [
        (heading.SUMMARY, continued_pretraining_summary(evaluation) + table(headline_table(results))
         + "".join(f"<p>{html.escape(s[0].upper() + s[1:])}.</p>" for s in results.plateau_sentences())),
        (heading.CORPUS, table(corpus_stats)),
        (heading.TOKENIZER, vocabulary_note(vocabulary_coverage) + table(tokenization_stats)),
        (heading.SEQUENCES, table(sequence_stats)),
        *([("Mixture: each source's share of a training epoch (counted on the drawn index)",
            table(pd.DataFrame(mixture)))] if mixture else []),
        (heading.TRAINING, image(training_curves(training_history, training.kept_step if training else None),
                                 "training curves") + validation_note(training)),
        (heading.TUNING, image(tuning_curve(tuning_trials, "continued" if continued else "finetune" if by_finetuning
                                            else None), "tuning trials")
         + (table(tuning_trials[trial_columns].rename(columns=trial_labels)) if trial_columns else "")
         + f"<p>Decision: {html.escape(tuning_decision(training))}.</p>"),
        (heading.FINETUNE, finetune_section(results.finetune, finetune_runs)),
        (heading.EVALUATION, table(evaluation_table(evaluation))
         + '<p class="muted">Every value, with its standard error, is in metrics.json.</p>'),
        (heading.FILL_MASK, fill_mask_list(evaluation.fill_mask_examples if evaluation else [])),
    ]
    if provenance is not None:
        sections = provenance.sections(sections)
    return page("bert-mlm run report", sections, "Evaluation: fixed 15 % masks with a fixed seed, so runs compare.")


def compare_variants(results: Mapping[str, ModelResults], histories: Mapping[str, pd.DataFrame],
                     finetune: Mapping[str, FinetuneResults] | None = None) -> tuple[pd.DataFrame, str]:
    """One row per variant (sorted by mask probability) and an HTML report; with fine-tuning, each
    variant's score paired with the lowest mask probability's (``finetune_difference``, 95 % interval)."""
    ordered = dict(sorted(results.items(), key=lambda item: _probability(item[1])))
    comparison = pd.DataFrame([{"variant": name, **result.to_json()} for name, result in ordered.items()])
    comparison = comparison[[column for column in COMPARED if column in comparison]]
    losses = {name: result.evaluation.test.loss for name, result in ordered.items()
              if result.evaluation is not None and math.isfinite(result.evaluation.test.loss)}
    best = min(losses, key=losses.__getitem__) if losses else None
    verdict = f"<p>Lowest fixed-protocol eval loss: <b>{html.escape(best)}</b>.</p>" if best else \
        "<p>No finite eval loss.</p>"
    # Each task every variant was fine-tuned on, paired against the lowest mask rate's.
    keys = [task.key for task in next(iter((finetune or {}).values()), ())]
    for position, key in enumerate(keys):
        tuned = {name: task for name, found in (finetune or {}).items() for task in found
                 if task.key == key and task.score.seeds}
        if not len(tuned) == len(results) > 1:
            continue
        reference = next(iter(ordered))
        paired = paired_differences({name: tuned[name] for name in ordered}, reference).drop(columns="reference")
        named = f" ({key})" if position else ""
        comparison = comparison.merge(paired.add_suffix(named).rename(columns={f"variant{named}": "variant"}),
                                      on="variant", how="left")
        leader = max(tuned, key=lambda name: tuned[name].score.mean)
        verdict += (f"<p>Highest fine-tuned {html.escape(label(tuned[leader].metric))}{html.escape(named)}: "
                    f"<b>{html.escape(leader)}</b>; differences are paired against {html.escape(reference)} (same "
                    "seeds, data order and eval examples).</p>")
    sections = [("Variants", table(comparison) + verdict),
                ("Curves and metrics", image(comparison_figure(histories, ordered), "comparison")),
                *[(f"Fill-mask: {name}", fill_mask_list(result.evaluation.fill_mask_examples if result.evaluation
                                                        else [])) for name, result in results.items()]]
    return comparison.reset_index(drop=True), page(
        "bert-mlm mask-rate comparison", sections, "Same data, model, steps and seed; only the training mask "
        "probability differs. Every variant is evaluated with the same fixed 15 % masks.")


def _probability(result: ModelResults) -> float:
    probability = result.training.mask_probability if result.training else None
    return probability if probability is not None else math.inf
