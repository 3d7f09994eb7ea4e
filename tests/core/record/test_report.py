"""The HTML run report and the mask-rate comparison."""

from __future__ import annotations

import base64
import html
import re

import numpy as np
import pandas as pd
import pytest

from bert_mlm.core.record import report as reports
from bert_mlm.core.record.figures import training_curves, tuning_curve
from bert_mlm.core.record.results import ModelResults


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
        "eval_masked_tokens": 20_736, "eval_sequences": 1_040, "eval_held_out_sequences": 1_500, "eval_mask_draws": 8,
        "eval_split": "test", "eval_mask_probability": 0.15, "eval_seed": 20231, "eval_whole_word": False,
        "baseline_token": "the",
        "fill_mask_examples": [
            {
                "sentence": "The [MASK] is <b>bold</b>.",
                "predictions": [{"token": "<unk-ish>", "score": 0.5}, {"token": "value", "score": 0.2}],
            }
        ],
    }


def run_report(values: dict, *args, **kwargs) -> str:
    """The report of ``values``: a metrics.json's keys (these are of this version's file and earlier ones)."""
    return reports.run_report(ModelResults.from_json(values), *args, **kwargs)


def compare_variants(variants: dict[str, dict], *args, **kwargs):
    return reports.compare_variants({name: ModelResults.from_json(values) for name, values in variants.items()},
                                    *args, **kwargs)


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


def test_a_continued_run_opens_with_its_before_and_after():
    sentences = {"eval_change_summary": "continued pretraining lowered the held-out loss on the test split of "
                                        "酒店评论.csv from 3.91 to 3.12 (-0.79 ± 0.02; accuracy 0.312 -> 0.388)",
                 "extra_eval_change_summary": "continued pretraining raised the held-out loss on news.txt from 3.02 "
                                              "to 3.15 (+0.13 ± 0.01; accuracy 0.402 -> 0.389): what it forgot there"}
    changes = {"eval_loss_start": 3.91, "eval_loss_change": -0.79, "eval_loss_change_se": 0.02,
               "extra_eval_loss": 3.15, "extra_eval_accuracy": 0.389}
    page = run_report({**metrics(), **sentences, **changes}, history(0))
    summary = page[page.index("<h2>Summary</h2>"):page.index("<h2>Corpus</h2>")]
    assert "<b>Continued pretraining lowered the held-out loss on the test split of 酒店评论.csv" in summary
    assert "<b>Continued pretraining raised the held-out loss on news.txt" in summary
    assert "-0.7900 ± 0.0200" in summary and "paired" in summary
    assert "Continued pretraining" not in run_report(metrics(), history(0))  # from scratch: no such lines


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


def visible_text(page: str) -> str:
    """The page's text as a reader sees it: no markup, no embedded images."""
    return html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r'src="data:[^"]*"', "", page)))


def finetuned(metrics_: dict) -> dict:
    return {**metrics_, "finetune_summary": "fine-tuned accuracy 0.851 vs 0.844 for the random initialisation "
                                            "(majority class 0.669): pretraining gained +0.7 accuracy points",
            "finetune_accuracy": 0.851, "finetune_accuracy_se": 0.004, "finetune_baseline_accuracy": 0.844,
            "finetune_baseline_accuracy_se": 0.005, "finetune_majority_accuracy": 0.669, "finetune_gain": 0.007,
            "finetune_gain_ci_low": 0.001, "finetune_gain_ci_high": 0.015, "finetune_macro_f1": 0.83,
            "finetune_baseline_macro_f1": 0.82, "finetune_baseline": "the random initialisation (same shape)",
            "finetune_train_examples": 1000, "finetune_eval_examples": 872, "finetune_dataset": "sst2/train.tsv",
            "finetune_seeds": [0, 1], "finetune_seed_accuracy": [0.85, 0.852],
            "finetune_seed_macro_f1": [0.83, 0.83], "finetune_baseline_seed_accuracy": [0.84, 0.848],
            "finetune_baseline_seed_macro_f1": [0.82, 0.82]}


@pytest.mark.parametrize("decision", ["tuning skipped (tuning.n_trials=0)", None])  # None: an earlier metrics.json
def test_a_skipped_study_is_said_in_words_and_no_none_is_shown(decision):
    values = {**metrics(), "mask_probability_source": "parameters", "tuning_decision": decision,
              "device": None, "fill_mask_examples": []}
    text = visible_text(run_report(values, history(), tuning_trials=pd.DataFrame(columns=["number", "state", "value"])))
    assert text.count("tuning skipped (tuning.n_trials=0)") == 2  # the summary and the tuning section
    assert "None" not in text and "n/a" in text


def test_the_evaluation_section_is_a_short_labelled_table_not_the_raw_keys():
    raw = {**metrics(), "eval_loss_se": 0.01, "eval_accuracy_se": 0.002, "data_parallel_workers": 1,
           "learning_rate": 0.002, "resumed_from_step": 0, "eval_masked_tokens": 20_736, "eval_sequences": 1_040,
           "eval_held_out_sequences": 1_500, "eval_mask_draws": 8, "eval_split": "test", "eval_mask_probability": 0.15,
           "eval_seed": 20231, "eval_whole_word": False, "baseline_token": "the"}
    page = run_report(raw, history())
    section = page.split("<h2>Evaluation (fixed protocol)</h2>")[1].split("<h2>")[0]
    assert section.count("<tr>") <= 5  # a header and a few labelled rows
    for key in ("eval_loss_se", "data_parallel_workers", "learning_rate", "resumed_from_step"):
        assert key not in section
    text = visible_text(section)
    assert "1,040 of 1,500 sequences" in text and "20,736 masked tokens" in text and "15%" in text
    assert "'the'" in text and "metrics.json" in text


def test_fill_mask_sentences_read_without_a_tokenizers_spacing():
    examples = [{"sentence": "在成功时更需[MASK]谦卑 。", "predictions": [{"token": "要", "score": 0.4}],
                 "answer": "要", "answer_rank": 1},
                {"sentence": "The [MASK] is returned .", "predictions": [{"token": "value", "score": 0.2}]}]
    page = run_report({**metrics(), "fill_mask_examples": examples}, history())
    assert '<li lang="zh">在成功时更需[MASK]谦卑。' in page  # CJK glyphs chosen for Chinese
    assert "<li>The [MASK] is returned. &rarr;" in page


def test_pruned_trials_are_drawn_apart_and_do_not_stretch_the_finished_trials_axis():
    trials = pd.DataFrame({"number": [0, 1, 2, 3], "state": ["COMPLETE", "PRUNED", "COMPLETE", "COMPLETE"],
                           "params_probability": [0.15, 0.2, 0.3, 0.35], "value": [6.6, None, 6.5, 6.55],
                           "last_intermediate_value": [6.6, 9.4, 6.5, 6.55]})
    finished_axis, pruned_axis = tuning_curve(trials).axes
    low, high = finished_axis.get_ylim()
    assert low < 6.5 and 6.6 < high < 6.8  # the pruned 9.4 is not on this axis
    assert pruned_axis.get_ylim()[0] < 9.4 < pruned_axis.get_ylim()[1]
    assert len(tuning_curve(trials[trials["state"] == "COMPLETE"]).axes) == 1  # no empty panel


def test_fine_tuning_shows_both_accuracies_and_the_majority_class():
    page = run_report(finetuned(metrics()), history())
    section = visible_text(page.split("<h2>Fine-tuning on the downstream task</h2>")[1].split("<h2>")[0])
    assert "fine-tuned accuracy 0.851 vs 0.844" in section and "majority class 0.669" in section
    assert "pretrained model 0.8510 ± 0.0040" in " ".join(section.split())
    assert "starting point: the random initialisation (same shape) 0.8440 ± 0.0050" in " ".join(section.split())
    assert "+0.7 [95 % CI +0.1, +1.5]" in section
    assert "majority class (always the most frequent training label) 0.669" in " ".join(section.split())


def entity_task(f1: list[float], sentences: list[float], name: str = "ner") -> dict:
    """A token task's keys as finetune_tasks holds them (without the prefix)."""
    return {"summary": f"fine-tuned entity F1 {np.mean(f1):.3f} vs 0.700 for the random initialisation (strict IOB2)",
            "task": name, "kind": "token", "metric": "entity_f1", "dataset": "msra.conll", "eval_examples": 300,
            "entity_f1": float(np.mean(f1)), "entity_f1_se": 0.01, "seed_entity_f1": f1, "entity_precision": 0.8,
            "entity_precision_se": 0.0, "seed_entity_precision": [0.8] * len(f1), "baseline_entity_f1": 0.7,
            "baseline_entity_f1_se": 0.01, "baseline_seed_entity_f1": [0.7] * len(f1), "gain": np.mean(f1) - 0.7,
            "gain_se": 0.01, "gain_ci_low": np.mean(f1) - 0.72, "gain_ci_high": np.mean(f1) - 0.68,
            "seeds": list(range(len(f1))), "example_entity_f1": sentences,
            "entity_f1_per_type": {"pretrained": {"LOC": 0.9, "PER": 0.8}, "baseline": {"LOC": 0.7, "PER": 0.6}}}


def test_a_token_task_beside_a_sequence_task_says_entity_f1_per_type():
    values = {**finetuned(metrics()), "finetune_task": "sentiment", "finetune_tasks": {"ner": entity_task(
        [0.81, 0.83], [0.8] * 300)}}
    section = visible_text(run_report(values, history()).split("<h2>Fine-tuning on the downstream task</h2>")[1]
                           .split("<h2>")[0])
    words = " ".join(section.split())
    assert "sentiment" in words and "fine-tuned entity F1 0.820 vs 0.700" in words
    assert "300 eval sentences of msra.conll (token classification)" in words
    assert "model LOC PER pretrained 0.9000 0.8000" in words
    assert "entity_f1 (mean over seeds) entity-precision" in words and "+12.0 [95 % CI +10.0, +14.0]" in words
    assert words.count("Nothing recorded") == 0  # a sequence task has no table of entity types


def test_mask_rate_variants_are_paired_by_entity_f1():
    variants = {name: {**metrics(0.12, probability), "finetune_summary": "ner", "finetune_model_version": None,
                       **{f"finetune_{key}": value for key, value in entity_task(f1, sentences).items()}}
                for name, probability, f1, sentences in (("mask_015", 0.15, [0.80, 0.82, 0.81], [0.81] * 300),
                                                        ("mask_030", 0.30, [0.85, 0.86, 0.855], [0.855] * 300))}
    results = {name: ModelResults.from_json(values) for name, values in variants.items()}
    table, page = reports.compare_variants(results, {name: history() for name in variants},
                                           {name: result.finetune for name, result in results.items()})
    assert table["finetune_metric"].tolist() == ["entity_f1"] * 2
    assert table["finetune_difference"].iloc[1] == pytest.approx(0.045)
    assert table["finetune_difference_ci_low"].iloc[1] > 0
    assert "Highest fine-tuned entity-F1: <b>mask_030</b>" in page


@pytest.mark.parametrize(("accuracy", "share", "left", "said"), [
    (0.30, 0.40, 120, ["off the unigram plateau", "Validation left the unigram plateau at step 120"]),
    (0.12, 0.95, None, ["still on the unigram plateau: it fills masks with the most frequent tokens",
                        "Validation never left the unigram plateau"]),
])
def test_the_summary_says_whether_the_model_left_the_unigram_plateau(accuracy, share, left, said):
    """2x the most-frequent-token reference reads as progress even where every mask gets ，的。国."""
    training = {"plateau_left_step": left, "plateau_left_seconds": 61.0 if left else None,
                "plateau": "off the unigram plateau (...)" if left else "still on the unigram plateau (...)"}
    values = {**metrics(accuracy), "eval_frequent_share": share, **{k: v for k, v in training.items() if v}}
    summary = run_report(values, history(0))
    summary = summary[summary.index("<h2>Summary</h2>"):summary.index("<h2>Corpus</h2>")]
    assert all(sentence in summary for sentence in said), summary
    assert "plateau" not in run_report(metrics(), history(0)).split("<h2>Corpus</h2>")[0]  # not measured: silent
