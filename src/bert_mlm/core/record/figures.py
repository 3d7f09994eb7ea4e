"""The report's figures (matplotlib, drawn headless): training and validation curves, the tuning
trials, fine-tuning by epoch, and the mask-rate variants side by side; and a figure as an inline
PNG, so that a report is one self-contained page."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")  # reports are built headless
import matplotlib.pyplot as plt
import pandas as pd

from bert_mlm.config.tuning import SEARCHABLE
from bert_mlm.core.finetune.result import RUN_SCORE
from bert_mlm.core.record.results import ModelResults
from bert_mlm.core.train.result import VALID_ACCURACY, VALID_LOSS, VALID_TOKENS, validated_steps


def image(figure: plt.Figure | None, alt: str) -> str:
    """``figure`` as an inline PNG (closed once drawn)."""
    if figure is None:
        return f'<p class="muted">No {html.escape(alt)}.</p>'
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    plt.close(figure)
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()}">'


def training_curves(history: pd.DataFrame, kept_step: int | None = None) -> plt.Figure:
    """Per-step training loss and accuracy on the masked tokens, with a rolling mean, and the
    validation loss and accuracy (fixed protocol, the same masks at every step) where the run
    validated (``training.eval_every``), with the step whose weights were kept marked."""
    figure, (loss_axis, accuracy_axis) = plt.subplots(1, 2, figsize=(11, 4))
    validated = validated_steps(history)
    if len(history):
        window = max(1, len(history) // 50)
        loss_axis.plot(history["step"], history["loss"], alpha=0.3, label="training, per step")
        loss_axis.plot(history["step"], history["loss"].rolling(window).mean(), label=f"training, mean of {window}")
        accuracy_axis.plot(history["step"], history["accuracy"].rolling(window).mean(), label="training")
        if len(validated):
            tokens = int(validated[VALID_TOKENS].iloc[-1])
            label = f"validation ({tokens:,} masked tokens, fixed masks)"
            loss_axis.plot(validated["step"], validated[VALID_LOSS], "o-", label=label)
            accuracy_axis.plot(validated["step"], validated[VALID_ACCURACY], "o-", label=label)
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


def pareto_figure(trials: pd.DataFrame, budget: float | None = None) -> plt.Figure:
    """``tuning.objective: continued``: each finished trial's domain gain (the loss's fall on the
    domain) against its forgetting (the loss's rise on the general text), with their standard
    errors; the Pareto front joined, the forgetting budget a line."""
    finished = trials[trials["state"] == "COMPLETE"].copy()
    figure, axis = plt.subplots(figsize=(7, 4.2))
    gain, forgetting = -finished["values_0"].astype(float), finished["values_1"].astype(float)
    axis.errorbar(forgetting, gain, xerr=finished.get("attr_general_change_se"),
                  yerr=finished.get("attr_domain_change_se"), fmt="o", color="tab:blue", ecolor="0.7",
                  label="trials (± paired standard error)")
    front = finished[finished["pareto"]].sort_values("values_1") if "pareto" in finished else finished.iloc[:0]
    axis.plot(front["values_1"], -front["values_0"], "-o", color="tab:green", markerfacecolor="none", markersize=11,
              label="Pareto front")
    if budget is not None:
        axis.axvline(budget, color="tab:red", linestyle="--", label=f"tuning.forgetting_budget {budget:g}")
    for x_value, y_value, number in zip(forgetting, gain, finished["number"], strict=True):
        axis.annotate(f"trial {number}", (x_value, y_value), textcoords="offset points", xytext=(4, 4), fontsize=7)
    axis.set(xlabel="forgetting: general-text loss change (nats)", ylabel="domain gain: domain loss fall (nats)",
             title="Continued pretraining: domain gain against forgetting")
    axis.legend(fontsize=7)
    figure.tight_layout()
    return figure


def tuning_curve(trials: pd.DataFrame | None, objective: str | None = None,
                 budget: float | None = None) -> plt.Figure | None:
    """The objective against the searched value (the mask probability, else the first searched
    parameter) of every finished trial (:func:`pareto_figure` for ``tuning.objective: continued``);
    pruned trials in a panel of their own, at their last reported value: a loss after fewer steps
    is higher, and on the finished trials' axis it would squash them into a line. None without trials."""
    searched = [f"params_{name}" for name in SEARCHABLE if trials is not None and f"params_{name}" in trials]
    if trials is None or trials.empty or not searched:
        return None
    if objective == "continued":
        return pareto_figure(trials, budget)
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
    axis.set(ylabel="fine-tuning error (1 - accuracy or entity F1)" if objective == "finetune" else
             "eval loss (fixed 15 % masks)", title="Tuning trials")
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


def finetune_curves(runs: pd.DataFrame | None, majority: float | None = None, metric: str = "accuracy",
                    task: str = "") -> plt.Figure | None:
    """The task's eval score (``metric``: accuracy, entity F1) after each fine-tuning epoch: every
    seed faint, the mean over seeds bold, the pretrained model beside its baselines. None without
    runs of ``task`` (or with one epoch only)."""
    if runs is None or runs.empty or RUN_SCORE not in runs:  # runs of an earlier version: no curves
        return None
    runs = runs[runs["task"].fillna("").astype(str) == task] if "task" in runs else runs
    if runs["epoch"].nunique() < 2:
        return None
    figure, axis = plt.subplots(figsize=(7, 4))
    colours = ("tab:blue", "tab:orange", "tab:green", "tab:red")
    for (name, frame), colour in zip(runs.groupby("model", sort=False), colours, strict=False):
        for _, seed_runs in frame.groupby("seed"):
            axis.plot(seed_runs["epoch"], seed_runs[RUN_SCORE], color=colour, alpha=0.25)
        mean = frame.groupby("epoch")[RUN_SCORE].mean()
        axis.plot(mean.index, mean.values, "o-", color=colour,
                  label=f"{name} (mean of {frame['seed'].nunique()} seeds)")
    if majority is not None:
        axis.axhline(majority, color="grey", linestyle="--", linewidth=1, label="majority class")
    axis.set(xlabel="fine-tuning epoch (0: the linear probe head alone)", ylabel=f"eval {metric.replace('_', ' ')}",
             title=f"Fine-tuning {task}".strip())
    axis.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    axis.legend()
    figure.tight_layout()
    return figure


def comparison_figure(histories: Mapping[str, pd.DataFrame], results: Mapping[str, ModelResults]) -> plt.Figure:
    """Training loss of every variant over steps, and fixed-protocol eval metrics per variant."""
    figure, (curve_axis, metric_axis) = plt.subplots(1, 2, figsize=(12, 4))
    for name, history in histories.items():
        if len(history):
            window = max(1, len(history) // 30)
            curve_axis.plot(history["step"], history["loss"].rolling(window).mean(), label=name)
    curve_axis.set(xlabel="step", ylabel="training loss (at its own mask rate)", title="Training loss")
    curve_axis.legend()
    scored = sorted(((result.training.mask_probability, result.evaluation.test) for result in results.values()
                     if result.training is not None and result.evaluation is not None), key=lambda pair: pair[0])
    probabilities = [probability for probability, _ in scored]
    metric_axis.plot(probabilities, [test.accuracy for _, test in scored], "o-", label="accuracy (top-1)")
    metric_axis.plot(probabilities, [test.top5_accuracy for _, test in scored], "s-", label="top-5 accuracy")
    metric_axis.set(xlabel="training mask probability", ylabel="fixed-protocol accuracy",
                    title="Evaluation (15 % masks)")
    metric_axis.legend()
    figure.tight_layout()
    return figure
