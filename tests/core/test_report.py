"""The HTML run report and the mask-rate comparison."""

from __future__ import annotations

import base64
import re

import numpy as np
import pandas as pd
import pytest

from bert_mlm.core.report import compare_variants, run_report, training_curves, tuning_curve


def history(steps: int = 40, start: float = 9.0) -> pd.DataFrame:
    step = np.arange(1, steps + 1)
    return pd.DataFrame({"step": step, "loss": start - 0.05 * step, "accuracy": 0.01 * step / steps})


def metrics(accuracy: float = 0.12, probability: float = 0.15) -> dict:
    return {
        "eval_loss": 6.1,
        "eval_perplexity": 445.9,
        "eval_accuracy": accuracy,
        "eval_top5_accuracy": 0.25,
        "baseline_accuracy": 0.06,
        "accuracy_over_baseline": accuracy / 0.06,
        "mask_probability": probability,
        "mask_probability_source": "tuning",
        "train_tokens": 1_474_560,
        "train_tokens_per_second": 5123.4,
        "fill_mask_examples": [
            {
                "sentence": "The [MASK] is <b>bold</b>.",
                "predictions": [{"token": "<unk-ish>", "score": 0.5}, {"token": "value", "score": 0.2}],
            }
        ],
    }


def embedded_pngs(page: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)]


def test_run_report_holds_every_section_with_real_figures():
    trials = pd.DataFrame({"number": [0, 1, 2], "state": ["COMPLETE", "PRUNED", "COMPLETE"],
                           "params_probability": [0.15, 0.2, 0.3], "value": [6.6, None, 6.5],
                           "last_intermediate_value": [6.6, 6.9, 6.5]})
    stats = pd.DataFrame({"split": ["train", "test"], "sequences": [900, 50], "padding_efficiency": [0.987, 0.9]})
    page = run_report(metrics(), history(), corpus_stats=stats, tokenization_stats=stats, sequence_stats=stats,
                      tuning_trials=trials)
    for heading in ("Summary", "Corpus", "Tokenizer", "Sequences and padding efficiency", "Training",
                    "Tuning of the mask probability", "Evaluation (fixed protocol)", "Fill-mask examples"):
        assert f"<h2>{heading}</h2>" in page
    pngs = embedded_pngs(page)
    assert len(pngs) == 2 and all(png.startswith(b"\x89PNG") for png in pngs)  # training + tuning curves
    assert "0.9870" in page  # padding efficiency shown
    assert "<td>2.00x</td>" in page  # accuracy over the reference
    # Text from the model or the user is escaped, never injected as markup.
    assert "<b>bold</b>" not in page and "&lt;b&gt;bold&lt;/b&gt;" in page and "&lt;unk-ish&gt;" in page


def test_run_report_without_tuning_or_history_still_renders():
    page = run_report({**metrics(), "fill_mask_examples": []}, history(0), tuning_trials=pd.DataFrame())
    assert "No tuning trials." in page and "No fill-mask sentences." in page
    assert len(embedded_pngs(page)) == 1  # the (empty) training axes


def test_tuning_curve_needs_a_probability_column():
    assert tuning_curve(None) is None
    assert tuning_curve(pd.DataFrame({"number": [0], "state": ["COMPLETE"], "value": [1.0]})) is None
    assert (
        tuning_curve(pd.DataFrame({"number": [0], "state": ["COMPLETE"], "value": [1.0], "params_probability": [0.2]}))
        is not None
    )


def test_training_curves_plots_loss_and_accuracy():
    figure = training_curves(history())
    loss_axis, accuracy_axis = figure.axes
    assert loss_axis.get_ylabel() == "masked-token loss" and len(loss_axis.lines) == 2
    assert accuracy_axis.lines[0].get_ydata()[-1] == pytest.approx(0.01)


def test_the_validation_curve_is_drawn_beside_the_training_loss_with_the_kept_step():
    validated = history()
    rows = validated["step"] % 10 == 0
    validated.loc[rows, "valid_loss"] = [7.0, 6.5, 6.6, 6.8]
    validated.loc[rows, "valid_accuracy"] = [0.1, 0.2, 0.19, 0.18]
    validated.loc[rows, "valid_masked_tokens"] = 4707
    loss_axis, accuracy_axis = training_curves(validated, kept_step=20).axes
    curve = next(line for line in loss_axis.lines if line.get_label().startswith("validation (4,707 masked tokens"))
    assert list(curve.get_xdata()) == [10, 20, 30, 40] and list(curve.get_ydata()) == [7.0, 6.5, 6.6, 6.8]
    assert any(line.get_label() == "kept: step 20" for line in loss_axis.lines)
    assert loss_axis.get_title() == "Training and validation loss" and len(accuracy_axis.lines) == 3
    summary = {"eval_every": 10, "valid_masked_tokens": 4707, "valid_share": 0.057, "best_valid_loss": 6.5,
               "best_valid_step": 20, "final_valid_loss": 6.8, "keep_best": True, "kept_step": 20}
    page = run_report({**metrics(), **summary}, validated)
    assert "Validated every 10 steps on 4,707 masked tokens of the valid split (5.7% of training time)" in page
    assert "the model saved is step 20&#x27;s" in page


def test_the_report_says_what_an_inherited_vocabulary_lacked_and_what_was_added():
    coverage = {"source": "bert-base-chinese", "inherited_tokens": 21128, "measured_tokens": 985706,
                "unknown_rate": 0.0017, "unknown_tokens": 1676, "uncovered_words": [["“", 700]],
                "uncovered_characters": [["“", 700], ["<b>", 3]], "warning_rate": 0.001, "added_tokens": 74,
                "added": ["“", "”"], "unknown_rate_after": 0.0}
    page = run_report(metrics(), history(), vocabulary_coverage=coverage)
    assert "turns 0.170% of the training text's tokens into [UNK] (1,676 of 985,706)" in page
    assert "<code>“</code> x700" in page and "&lt;b&gt;" in page  # escaped
    assert "tokenizer.extend_vocabulary added 74 tokens" in page and "[UNK] rate after: 0.000%" in page
    warned = run_report(metrics(), history(), vocabulary_coverage={**coverage, "added_tokens": 0, "added": []})
    assert "set tokenizer.extend_vocabulary" in warned
    assert "inherited vocabulary" not in run_report(metrics(), history(), vocabulary_coverage={})


def test_compare_variants_orders_by_probability_and_names_the_best():
    variants = {"mask_045": metrics(0.10, 0.45), "mask_015": metrics(0.12, 0.15), "mask_030": metrics(0.13, 0.30)}
    variants["mask_030"]["eval_loss"] = 5.9
    table, page = compare_variants(variants, {name: history() for name in variants})
    assert list(table["variant"]) == ["mask_015", "mask_030", "mask_045"]
    assert list(table["mask_probability"]) == [0.15, 0.30, 0.45]
    assert "fill_mask_examples" not in table
    assert "Lowest fixed-protocol eval loss: <b>mask_030</b>" in page
    assert len(embedded_pngs(page)) == 1 and page.count("Fill-mask: mask_0") == 3


def test_compare_variants_survives_diverged_variants():
    variants = {
        "mask_015": {**metrics(0.1, 0.15), "eval_loss": float("nan")},
        "mask_030": {**metrics(0.1, 0.3), "eval_loss": float("nan")},
    }
    table, page = compare_variants(variants, {name: history() for name in variants})
    assert len(table) == 2 and "No finite eval loss." in page
