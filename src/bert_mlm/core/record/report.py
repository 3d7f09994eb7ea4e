"""Run reports: one self-contained HTML page (tables, and PNG figures embedded inline) that a
person can open from ``data/08_reporting`` in any browser, mail, or attach to a ticket."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")  # reports are built headless
import matplotlib.pyplot as plt
import pandas as pd

from bert_mlm.config.tuning import SEARCHABLE
from bert_mlm.core.common.formatting import format_value, with_error
from bert_mlm.core.common.text import cjk_characters, readable_spacing
from bert_mlm.core.finetune.runs import compare_runs
from bert_mlm.core.record import provenance as heading  # the sections' headings, which provenance captions
from bert_mlm.core.record.provenance import Provenance
from bert_mlm.core.record.results import with_current_names

# Headline metrics, in the order a reader looks for them.
HEADLINE = (
    ("eval_accuracy", "masked-token accuracy (top-1)"),
    ("baseline_accuracy", "most-frequent-token reference"),
    ("accuracy_over_baseline", "accuracy / reference"),
    ("eval_top5_accuracy", "top-5 accuracy"),
    ("eval_loss", "masked-token loss"),
    ("eval_perplexity", "perplexity"),
    ("eval_loss_start", "masked-token loss of the starting model (model.init_from)"),
    ("eval_loss_change", "loss change from the starting model (paired)"),
    ("eval_accuracy_start", "accuracy of the starting model"),
    ("extra_eval_accuracy", "accuracy on evaluation.corpus_path"),
    ("extra_baseline_accuracy", "reference on evaluation.corpus_path"),
    ("extra_eval_loss", "loss on evaluation.corpus_path"),
    ("extra_eval_loss_start", "loss of the starting model on evaluation.corpus_path"),
    ("extra_eval_loss_change", "loss change on evaluation.corpus_path (paired)"),
    ("finetune_summary", "fine-tuning"),
    ("finetune_accuracy", "fine-tuned accuracy"),
    ("finetune_baseline_accuracy", "fine-tuned accuracy of the starting point"),
    ("finetune_gain", "fine-tuning gain (accuracy)"),
    ("finetune_macro_f1", "fine-tuned macro-F1"),
    ("mask_probability", "training mask probability"),
    ("mask_probability_source", "mask probability from"),
    ("tuning_decision", "tuning decision"),
    ("train_steps", "training steps"),
    ("train_tokens", "training tokens"),
    ("train_tokens_per_second", "training tokens/s"),
    ("train_seconds", "training seconds"),
    ("device", "device"),
    ("precision", "precision"),
    ("parameter_count", "model parameters (count)"),
)

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


def figure_png_base64(figure: plt.Figure, dpi: int = 100) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def image(figure: plt.Figure | None, alt: str) -> str:
    if figure is None:
        return f'<p class="muted">No {html.escape(alt)}.</p>'
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{figure_png_base64(figure)}">'


def table(frame: pd.DataFrame | None, float_format: str = "{:,.4f}") -> str:
    if frame is None or frame.empty:
        return '<p class="muted">Nothing recorded.</p>'
    return _counts_with_gaps(frame).to_html(
        index=False, border=0, float_format=float_format.format, na_rep="", escape=True
    )


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


def tuning_decision(metrics: Mapping) -> str:
    """The decision in words; ``metrics.json`` of earlier versions held ``null`` when there was none."""
    if metrics.get("tuning_decision"):
        return str(metrics["tuning_decision"])
    return {"parameters": "tuning skipped (tuning.n_trials=0)",
            "tuning": "the study's best adopted as it is (tuning.adopt=always)"}.get(
        metrics.get("mask_probability_source"), "n/a")


def headline_table(metrics: Mapping) -> pd.DataFrame:
    def shown(key: str) -> str:
        if key == "accuracy_over_baseline":
            return f"{metrics[key]:.2f}x"
        if key == "tuning_decision":
            return tuning_decision(metrics)
        return with_error(metrics, key)

    rows = [(label, shown(key)) for key, label in HEADLINE if key in metrics]
    if "eval_masked_tokens" in metrics:
        rows.append(("masked tokens scored (± is one standard error)", format_value(metrics["eval_masked_tokens"])))
    return pd.DataFrame(rows, columns=["metric", "value"])


def continued_pretraining_summary(metrics: Mapping) -> str:
    """The before/after sentences of continued pretraining (``model.init_from``), when there are."""
    sentences = [metrics[key] for key in ("eval_change_summary", "extra_eval_change_summary") if metrics.get(key)]
    if not sentences:
        return ""
    items = "".join(f"<li><b>{html.escape(sentence[0].upper() + sentence[1:])}</b>.</li>" for sentence in sentences)
    return (f"<ul>{items}</ul><p class='muted'>Both models scored on the same masked tokens; ± is the paired "
            "standard error of the change.</p>")


def evaluation_table(metrics: Mapping) -> pd.DataFrame:
    """What the summary's numbers rest on, in a few labelled rows: the held-out data scored, the
    protocol, the reference's token, and the extra corpus's results. Every value (standard errors,
    counts, settings) stays in ``metrics.json``."""
    rows = []
    if "eval_masked_tokens" in metrics:
        sequences = metrics.get("eval_sequences")
        of = metrics.get("eval_held_out_sequences")
        scored = f"{sequences:,} of {of:,} sequences" if sequences is not None and of is not None else ""
        draws = metrics.get("eval_mask_draws")
        rows.append(("held-out data scored", ", ".join(part for part in (
            f"the {metrics.get('eval_split', 'test')} split", scored,
            f"{metrics['eval_masked_tokens']:,} masked tokens",
            f"{draws} mask draw(s)" if draws else "") if part)))
    if "eval_mask_probability" in metrics:
        words = "whole words" if metrics.get("eval_whole_word") else "tokens"
        rows.append(("protocol", f"{metrics['eval_mask_probability']:.0%} of the {words} masked (80/10/10), "
                                 f"fixed seed {metrics.get('eval_seed', 'n/a')}: every model scored on the same masks"))
    if "baseline_token" in metrics:
        rows.append(("most-frequent-token reference", f"always predicting {metrics['baseline_token']!r}: "
                                                      f"accuracy {format_value(metrics.get('baseline_accuracy'))}"))
    if "extra_eval_accuracy" in metrics:
        rows.append(("evaluation.corpus_path", str(metrics.get("extra_corpus_path", "the extra corpus"))))
        rows += [(f"  {label}", with_error(metrics, key)) for key, label in (
            ("extra_eval_loss", "masked-token loss"), ("extra_eval_accuracy", "accuracy (top-1)"),
            ("extra_eval_top5_accuracy", "top-5 accuracy"),
            ("extra_baseline_accuracy", "most-frequent-token reference"),
            ("extra_eval_masked_tokens", "masked tokens scored")) if key in metrics]
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
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>"
        f"<p class='muted'>{html.escape(subtitle)} Created {created}.</p>{body}</body></html>\n"
    )


# ----------------------------------------------------------------------------- figures
def training_curves(history: pd.DataFrame, kept_step: int | None = None) -> plt.Figure:
    """Per-step training loss and accuracy on the masked tokens, with a rolling mean, and the
    validation loss and accuracy (fixed protocol, the same masks at every step) where the run
    validated (``training.eval_every``), with the step whose weights were kept marked."""
    figure, (loss_axis, accuracy_axis) = plt.subplots(1, 2, figsize=(11, 4))
    validated = history.dropna(subset=["valid_loss"]) if "valid_loss" in history else history.iloc[:0]
    if len(history):
        window = max(1, len(history) // 50)
        loss_axis.plot(history["step"], history["loss"], alpha=0.3, label="training, per step")
        loss_axis.plot(history["step"], history["loss"].rolling(window).mean(), label=f"training, mean of {window}")
        accuracy_axis.plot(history["step"], history["accuracy"].rolling(window).mean(), label="training")
        if len(validated):
            tokens = int(validated["valid_masked_tokens"].iloc[-1])
            label = f"validation ({tokens:,} masked tokens, fixed masks)"
            loss_axis.plot(validated["step"], validated["valid_loss"], "o-", label=label)
            accuracy_axis.plot(validated["step"], validated["valid_accuracy"], "o-", label=label)
            if kept_step is not None and kept_step != int(history["step"].max()):
                for axis in (loss_axis, accuracy_axis):
                    axis.axvline(kept_step, color="grey", linestyle="--", linewidth=1, label=f"kept: step {kept_step}")
            accuracy_axis.legend()
        loss_axis.legend()
    both = " and validation" if len(validated) else ""
    loss_axis.set(xlabel="step", ylabel="masked-token loss", title=f"Training{both} loss")
    accuracy_axis.set(xlabel="step", ylabel="masked-token accuracy", title=f"Training{both} accuracy")
    figure.tight_layout()
    return figure


def validation_note(metrics: Mapping) -> str:
    """One sentence under the training curves: how the run validated and which step it kept."""
    if not metrics.get("eval_every") or "final_valid_loss" not in metrics:
        return ""
    note = (f"Validated every {metrics['eval_every']:,} steps on {metrics['valid_masked_tokens']:,} masked tokens of "
            f"the valid split ({metrics['valid_share']:.1%} of training time); lowest validation loss "
            f"{metrics['best_valid_loss']:.4f} at step {metrics['best_valid_step']:,}, last "
            f"{metrics['final_valid_loss']:.4f}.")
    if metrics.get("keep_best"):
        note += f" training.keep_best: the model saved is step {metrics['kept_step']:,}'s."
    return f"<p>{html.escape(note)}</p>"


def tuning_curve(trials: pd.DataFrame | None, objective: str = "eval_loss") -> plt.Figure | None:
    """The objective (fixed-protocol eval loss, or fine-tuning error) against the searched value
    (the mask probability, else the first searched parameter) of every finished trial; pruned
    trials in a panel of their own below, at their last reported value: a loss after fewer steps is
    higher, and on the finished trials' axis it would squash them into a line. None without
    trials. The one tuning figure: the run report shows it and the catalog saves it for Kedro-Viz."""
    searched = [f"params_{name}" for name in SEARCHABLE if trials is not None and f"params_{name}" in trials]
    if trials is None or trials.empty or not searched:
        return None
    x_column = "params_probability" if "params_probability" in searched else searched[0]
    finished = trials[trials["state"] == "COMPLETE"]
    pruned = trials[trials["state"] == "PRUNED"]
    if len(pruned):
        figure, (axis, pruned_axis) = plt.subplots(2, 1, figsize=(7, 5.2), sharex=True,
                                                   gridspec_kw={"height_ratios": [3, 1]})
    else:
        figure, axis = plt.subplots(figsize=(7, 4))
        pruned_axis = None
    _trial_points(axis, finished, x_column, finished["value"], "o", "tab:blue", "finished")
    axis.set(ylabel="eval loss (fixed 15 % masks)" if objective == "eval_loss" else "fine-tuning error (1 - accuracy)",
             title="Tuning trials")
    if len(finished):
        axis.legend()
    if pruned_axis is not None:
        values = pruned.get("last_intermediate_value", pruned["value"])
        _trial_points(pruned_axis, pruned, x_column, values, "x", "tab:orange", "pruned")
        pruned_axis.set_ylabel("last value\n(pruned early)", fontsize=8)
        pruned_axis.legend(fontsize=7, loc="upper right")
    (pruned_axis or axis).set_xlabel(x_column.removeprefix("params_").replace("probability", "mask probability"))
    figure.tight_layout()
    return figure


def _trial_points(axis, part: pd.DataFrame, x_column: str, values: pd.Series, marker: str, colour: str,
                  label: str) -> None:
    x = part[x_column].astype(float)
    axis.scatter(x, values, marker=marker, color=colour, label=label)
    for x_value, y_value, number in zip(x, values, part["number"], strict=True):
        axis.annotate(f"trial {number}", (x_value, y_value), textcoords="offset points", xytext=(4, 4), fontsize=7)


def finetune_curves(runs: pd.DataFrame | None, majority: float | None = None) -> plt.Figure | None:
    """Eval accuracy after each fine-tuning epoch: every seed faint, the mean over seeds bold, the
    pretrained model beside its starting point. None without runs (or with one epoch only)."""
    if runs is None or runs.empty or runs["epoch"].nunique() < 2:
        return None
    figure, axis = plt.subplots(figsize=(7, 4))
    for (name, frame), colour in zip(runs.groupby("model", sort=False), ("tab:blue", "tab:orange"), strict=False):
        for _, seed_runs in frame.groupby("seed"):
            axis.plot(seed_runs["epoch"], seed_runs["eval_accuracy"], color=colour, alpha=0.25)
        mean = frame.groupby("epoch")["eval_accuracy"].mean()
        axis.plot(
            mean.index, mean.values, "o-", color=colour, label=f"{name} (mean of {frame['seed'].nunique()} seeds)"
        )
    if majority is not None:
        axis.axhline(majority, color="grey", linestyle="--", linewidth=1, label="majority class")
    axis.set(xlabel="fine-tuning epoch (0: the linear probe head alone)", ylabel="eval accuracy", title="Fine-tuning")
    axis.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    axis.legend()
    figure.tight_layout()
    return figure


def finetune_table(metrics: Mapping) -> pd.DataFrame | None:
    """Per seed: the pretrained model's and its baseline's accuracy and macro-F1, and their difference."""
    seeds = metrics.get("finetune_seeds")
    if not seeds:
        return None
    frame = pd.DataFrame({"seed": seeds, "accuracy": metrics["finetune_seed_accuracy"],
                          "macro-F1": metrics["finetune_seed_macro_f1"]})
    if metrics.get("finetune_baseline_seed_accuracy"):
        frame["baseline accuracy"] = metrics["finetune_baseline_seed_accuracy"]
        frame["baseline macro-F1"] = metrics["finetune_baseline_seed_macro_f1"]
        frame["accuracy gain"] = frame["accuracy"] - frame["baseline accuracy"]
    return frame


def finetune_overview(metrics: Mapping) -> pd.DataFrame:
    """The pretrained model, its starting point and the majority class side by side: whether both
    models sit at 55 % or at 85 % says what a gain of a point means."""
    rows = [("pretrained model", with_error(metrics, "finetune_accuracy"),
             format_value(metrics.get("finetune_macro_f1")))]
    if "finetune_baseline_accuracy" in metrics:
        rows.append((f"starting point: {metrics.get('finetune_baseline', 'baseline')}",
                     with_error(metrics, "finetune_baseline_accuracy"),
                     format_value(metrics.get("finetune_baseline_macro_f1"))))
    if "finetune_gain" in metrics:
        low, high = metrics.get("finetune_gain_ci_low"), metrics.get("finetune_gain_ci_high")
        interval = f" [95 % CI {100 * low:+.1f}, {100 * high:+.1f}]" if low is not None and high is not None else ""
        rows.append(("gain (points)", f"{100 * metrics['finetune_gain']:+.1f}{interval}", ""))
    if "finetune_majority_accuracy" in metrics:
        rows.append(("majority class (always the most frequent training label)",
                     format_value(metrics["finetune_majority_accuracy"]), ""))
    return pd.DataFrame(rows, columns=["", "accuracy (mean over seeds)", "macro-F1"])


def finetune_section(metrics: Mapping, runs: pd.DataFrame | None) -> str:
    if not metrics.get("finetune_summary"):
        return '<p class="muted">No fine-tuning evaluation (set finetune.train_path).</p>'
    summary = f"<p><b>{html.escape(str(metrics['finetune_summary']))}</b>.</p>"
    reference = (
        f"<p class='muted'>{metrics['finetune_train_examples']:,} training and "
        f"{metrics['finetune_eval_examples']:,} eval examples of {html.escape(str(metrics['finetune_dataset']))}; "
        f"majority class {metrics['finetune_majority_accuracy']:.4f}.</p>"
    )
    return (
        summary
        + reference
        + table(finetune_overview(metrics))
        + table(finetune_table(metrics))
        + image(finetune_curves(runs, metrics.get("finetune_majority_accuracy")), "fine-tuning curves")
    )


def comparison_figure(histories: Mapping[str, pd.DataFrame], comparison: pd.DataFrame) -> plt.Figure:
    """Training loss of every variant over steps, and fixed-protocol eval metrics per variant."""
    figure, (curve_axis, metric_axis) = plt.subplots(1, 2, figsize=(12, 4))
    for name, history in histories.items():
        if len(history):
            window = max(1, len(history) // 30)
            curve_axis.plot(history["step"], history["loss"].rolling(window).mean(), label=name)
    curve_axis.set(xlabel="step", ylabel="training loss (at its own mask rate)", title="Training loss")
    curve_axis.legend()
    ordered = comparison.sort_values("mask_probability")
    metric_axis.plot(ordered["mask_probability"], ordered["eval_accuracy"], "o-", label="accuracy (top-1)")
    metric_axis.plot(ordered["mask_probability"], ordered["eval_top5_accuracy"], "s-", label="top-5 accuracy")
    metric_axis.set(
        xlabel="training mask probability", ylabel="fixed-protocol accuracy", title="Evaluation (15 % masks)"
    )
    metric_axis.legend()
    figure.tight_layout()
    return figure


def vocabulary_note(coverage: Mapping | None) -> str:
    """An inherited vocabulary's [UNK] rate on the training text, what it lacked, and what was added."""
    if not coverage:
        return ""

    def listed(pairs) -> str:
        return ", ".join(f"<code>{html.escape(str(token))}</code> x{count:,}" for token, count in pairs) or "none"

    parts = [f"The inherited vocabulary ({coverage['inherited_tokens']:,} tokens, from "
             f"<code>{html.escape(str(coverage['source']))}</code>) turns {coverage['unknown_rate']:.3%} of the "
             f"training text's tokens into [UNK] ({coverage['unknown_tokens']:,} of {coverage['measured_tokens']:,})."]
    if coverage.get("uncovered_characters"):
        parts.append(f"Commonest missing: {listed(coverage['uncovered_characters'])}.")
    if coverage.get("added_tokens"):
        shown = ", ".join(f"<code>{html.escape(token)}</code>" for token in coverage["added"][:20])
        parts.append(f"tokenizer.extend_vocabulary added {coverage['added_tokens']:,} tokens ({shown}"
                     f"{', ...' if coverage['added_tokens'] > 20 else ''}); [UNK] rate after: "
                     f"{coverage['unknown_rate_after']:.3%}.")
    elif coverage["unknown_rate"] > coverage["warning_rate"]:
        parts.append("Above tokenizer.unk_warning_rate: set tokenizer.extend_vocabulary to add the missing tokens.")
    return f"<p>{' '.join(parts)}</p>"


# ----------------------------------------------------------------------------- reports
def mixture_section(mixture: Mapping | None) -> list[tuple[str, str]]:
    """A mixture's sources: setting, stored sequences and each source's share of an epoch, counted
    on the drawn index (the weights apply when training samples, not in the stored data)."""
    if not mixture:
        return []
    frame = pd.DataFrame([{"source": name, **values} for name, values in mixture.items()])
    return [("Mixture: each source's share of a training epoch (counted on the drawn index)", table(frame))]


def run_report(
    metrics: Mapping,
    training_history: pd.DataFrame,
    corpus_stats: pd.DataFrame | None = None,
    tokenization_stats: pd.DataFrame | None = None,
    sequence_stats: pd.DataFrame | None = None,
    tuning_trials: pd.DataFrame | None = None,
    finetune_runs: pd.DataFrame | None = None,
    vocabulary_coverage: Mapping | None = None,
    provenance: Provenance | None = None,
) -> str:
    """The report of one `kedro run`: data, tokenizer (an inherited vocabulary's coverage),
    sequences (padding efficiency), training curves, tuning, fine-tuning, evaluation metrics and
    fill-mask examples. With ``provenance``, it opens with how the model's run was made, and every
    section says which model and run it belongs to."""
    metrics = with_current_names(metrics)  # metrics.json of earlier versions
    by_finetuning = tuning_trials is not None and "attr_finetune_accuracy" in tuning_trials
    trial_labels = {"number": "trial", "state": "state", "params_probability": "mask probability",
                    "value": "fine-tuning error" if by_finetuning else "eval loss",
                    "attr_seed_spread": "spread over seeds", "last_intermediate_value": "last reported value",
                    "duration_seconds": "seconds"}
    trial_columns = [c for c in trial_labels if tuning_trials is not None and c in tuning_trials]
    decision_html = f"<p>Decision: {html.escape(tuning_decision(metrics))}.</p>"
    tuning_objective = "finetune" if by_finetuning else "eval_loss"
    sections = [
        (heading.SUMMARY, continued_pretraining_summary(metrics) + table(headline_table(metrics))),
        (heading.CORPUS, table(corpus_stats)),
        (heading.TOKENIZER, vocabulary_note(vocabulary_coverage) + table(tokenization_stats)),
        (heading.SEQUENCES, table(sequence_stats)),
        *mixture_section(metrics.get("mixture")),
        (heading.TRAINING, image(training_curves(training_history, metrics.get("kept_step")), "training curves")
         + validation_note(metrics)),
        (
            heading.TUNING,
            image(tuning_curve(tuning_trials, tuning_objective), "tuning trials")
            + (table(tuning_trials[trial_columns].rename(columns=trial_labels)) if trial_columns else "")
            + decision_html,
        ),
        (heading.FINETUNE, finetune_section(metrics, finetune_runs)),
        (heading.EVALUATION, table(evaluation_table(metrics))
         + '<p class="muted">Every value, with its standard error, is in metrics.json.</p>'),
        (heading.FILL_MASK, fill_mask_list(metrics.get("fill_mask_examples", []))),
    ]
    if provenance is not None:
        sections = provenance.sections(sections)
    return page("bert-mlm run report", sections, "Evaluation: fixed 15 % masks with a fixed seed, so runs compare.")


COMPARISON_COLUMNS = (
    "variant", "mask_probability", "eval_loss", "eval_loss_se", "eval_accuracy", "eval_accuracy_se",
    "eval_top5_accuracy", "baseline_accuracy", "accuracy_over_baseline", "extra_eval_accuracy",
    "extra_eval_accuracy_se", "finetune_accuracy", "finetune_accuracy_se", "finetune_macro_f1", "finetune_gain",
    "finetune_gain_ci_low", "finetune_gain_ci_high", "final_train_loss", "train_tokens_per_second",
)


def compare_variants(
    metrics: Mapping[str, Mapping],
    histories: Mapping[str, pd.DataFrame],
    finetune: Mapping[str, Mapping] | None = None,
) -> tuple[pd.DataFrame, str]:
    """One row per variant (sorted by mask probability) and an HTML report with its figure. With
    fine-tuning results, each variant's fine-tuned accuracy is also paired (same seeds, data
    order and eval examples) with the lowest mask probability's: ``finetune_difference`` and its
    95 % interval."""
    rows = [{"variant": name, **{k: v for k, v in m.items() if k in COMPARISON_COLUMNS}} for name, m in metrics.items()]
    comparison = pd.DataFrame(rows)
    comparison = comparison[[c for c in COMPARISON_COLUMNS if c in comparison]].sort_values("mask_probability")
    finite = comparison["eval_loss"].notna().any()
    best = comparison.loc[comparison["eval_loss"].idxmin(), "variant"] if finite else None
    verdict = (
        f"<p>Lowest fixed-protocol eval loss: <b>{html.escape(best)}</b>.</p>"
        if best
        else "<p>No finite eval loss.</p>"
    )
    tuned = {name: m for name, m in (finetune or {}).items() if m.get("finetune_seed_accuracy")}
    if len(tuned) == len(metrics) > 1:
        reference = str(comparison["variant"].iloc[0])
        paired = compare_runs({n: m["finetune_seed_accuracy"] for n, m in tuned.items()},
                              {n: m["finetune_example_accuracy"] for n, m in tuned.items()}, reference)
        comparison = comparison.merge(paired.drop(columns="reference"), on="variant", how="left")
        leader = comparison.loc[comparison["finetune_accuracy"].idxmax(), "variant"]
        verdict += (f"<p>Highest fine-tuned accuracy: <b>{html.escape(str(leader))}</b>; differences are paired "
                    f"against {html.escape(reference)} (same seeds, data order and eval examples).</p>")
    sections = [
        ("Variants", table(comparison) + verdict),
        ("Curves and metrics", image(comparison_figure(histories, comparison), "comparison")),
        *[(f"Fill-mask: {name}", fill_mask_list(m.get("fill_mask_examples", []))) for name, m in metrics.items()],
    ]
    return comparison.reset_index(drop=True), page(
        "bert-mlm mask-rate comparison", sections,
        "Same data, model, steps and seed; only the training mask probability differs. "
        "Every variant is evaluated with the same fixed 15 % masks.",
    )
