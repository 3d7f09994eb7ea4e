"""Entity scores equal seqeval's strict IOB2 classification report, score for score, on real
MSRA sentences with perturbed predictions and on the edge cases; a resample is scored by sums."""

from __future__ import annotations

import random

import numpy as np
import pytest
from seqeval.metrics import accuracy_score, classification_report
from seqeval.scheme import IOB2

from bert_mlm.config import FinetuneConfig
from bert_mlm.core.finetune.entities import EntityCounts, TagCodes
from bert_mlm.core.finetune.tag_schemes import tag_labels
from bert_mlm.core.finetune.tagged import load_tagged_task

AVERAGES = {"micro avg", "macro avg", "weighted avg"}


def tag_ids_of(sentences: list[list[str]], labels: list[str]) -> np.ndarray:
    return np.array([labels.index(tag) for tags in sentences for tag in tags], dtype=np.int64)


def counts_of(gold: list[list[str]], predicted: list[list[str]], labels: list[str]) -> EntityCounts:
    return EntityCounts.of(tag_ids_of(gold, labels), tag_ids_of(predicted, labels), [len(s) for s in gold],
                           TagCodes.of(labels))


def assert_agrees_with_seqeval(gold: list[list[str]], predicted: list[list[str]], labels: list[str]) -> dict:
    report = classification_report(gold, predicted, mode="strict", scheme=IOB2, output_dict=True, zero_division=0)
    ours = counts_of(gold, predicted, labels).scores()
    micro = report["micro avg"]
    assert (ours["precision"], ours["recall"], ours["f1"], ours["support"]) == (
        micro["precision"], micro["recall"], micro["f1-score"], micro["support"])
    assert set(report) - AVERAGES <= set(ours["per_type"])
    for kind, scores in ours["per_type"].items():
        expected = report.get(kind, {"precision": 0.0, "recall": 0.0, "f1-score": 0.0, "support": 0})
        assert (scores["precision"], scores["recall"], scores["f1"], scores["support"]) == (
            expected["precision"], expected["recall"], expected["f1-score"], expected["support"]), kind
    assert ours["token_accuracy"] == accuracy_score(gold, predicted)
    return ours


@pytest.fixture(scope="module")
def msra(msra_head) -> tuple[list[list[str]], list[str]]:
    # 1,500 of the first 4,000 sentences (eval_fraction 0.4 holds out ~1,600).
    config = FinetuneConfig(train_path=str(msra_head), max_train_examples=50, max_eval_examples=1500,
                            eval_fraction=0.4, seed=4)
    task = load_tagged_task(config)
    return task.evaluation["tags"].tolist(), task.labels


def perturbed(gold: list[list[str]], labels: list[str], how: str, seed: int = 0) -> list[list[str]]:
    """Predictions a tagger could make: random tags, shifted boundaries, swapped types, I- where B-
    belongs (entities seqeval's strict mode does not count), everything O."""
    rng = random.Random(seed)
    kinds = sorted({label[2:] for label in labels if label != "O"})
    result = []
    for tags in gold:
        tags = list(tags)
        for i, tag in enumerate(tags):
            draw = rng.random()
            if how == "random" and draw < 0.08:
                tags[i] = rng.choice(labels)
            elif how == "boundaries" and tag.startswith("B-") and draw < 0.3:  # extend left or cut the first word
                if i > 0 and tags[i - 1] == "O" and draw < 0.15:
                    tags[i - 1], tags[i] = tag, "I-" + tag[2:]
                else:
                    tags[i] = "O"
                    if i + 1 < len(tags) and tags[i + 1] == "I-" + tag[2:]:
                        tags[i + 1] = tag
            elif how == "types" and tag != "O" and draw < 0.2:
                tags[i] = tag[:2] + rng.choice(kinds)
            elif how == "inside_starts" and tag.startswith("B-") and draw < 0.3:
                tags[i] = "I-" + tag[2:]
        result.append(["O"] * len(tags) if how == "outside" else tags)
    return result


@pytest.mark.parametrize("how", ["random", "boundaries", "types", "inside_starts", "outside", "none"])
def test_msra_scores_equal_seqeval_strict_iob2(msra, how):
    gold, labels = msra
    scores = assert_agrees_with_seqeval(gold, perturbed(gold, labels, how), labels)
    assert scores["support"] > 1000 and set(scores["per_type"]) == {"LOC", "ORG", "PER"}
    assert (scores["f1"] == 1.0) == (how == "none") and (scores["f1"] == 0.0) == (how == "outside")


def test_edge_cases_equal_seqeval():
    # English and Chinese sentences: entities at both ends, adjacent entities of one type and of two,
    # I- starting an entity (after O, after another type, at the start), one-word and empty sentences.
    gold = [
        ["B-PER", "I-PER", "O", "B-LOC"],  # John Smith visited Paris
        ["B-PER", "B-PER", "I-PER", "O"],  # 张 李四 说: two people side by side
        ["I-LOC", "I-LOC", "O", "B-ORG", "I-ORG"],  # 北京 的 新华社: a stray I- at the start
        ["B-LOC", "I-PER", "O"],
        [],
        ["B-ORG"],
        ["O"],
        ["B-LOC", "I-LOC", "B-LOC", "I-LOC"],  # 中国 日本
    ]
    predicted = [
        ["B-PER", "I-PER", "O", "I-LOC"],  # the last entity starts with I-: none in strict mode
        ["B-PER", "I-PER", "I-PER", "O"],  # two merged into one: both missed, one false
        ["B-LOC", "I-LOC", "O", "B-ORG", "I-ORG"],
        ["B-LOC", "I-LOC", "O"],  # span too long
        [],
        ["B-PER"],  # wrong type
        ["B-MISC"],  # a type the gold tags never have
        ["B-LOC", "I-LOC", "B-LOC", "I-LOC"],
    ]
    labels = tag_labels({tag for tags in gold + predicted for tag in tags})
    scores = assert_agrees_with_seqeval(gold, predicted, labels)
    assert scores["per_type"]["MISC"]["support"] == 0 and scores["per_type"]["MISC"]["precision"] == 0.0


def test_a_resample_of_sentences_is_scored_by_the_sums_of_its_counts(msra):
    """What the bootstrap relies on: the F1 of any multiset of sentences is the ratio of their
    summed per-sentence parts (2 tp over predicted + gold)."""
    gold, labels = msra
    predicted = perturbed(gold, labels, "random", seed=3)
    numerator, denominator = counts_of(gold, predicted, labels).micro_f1_parts()
    draw = np.random.default_rng(0).integers(0, len(gold), len(gold))
    weights = np.bincount(draw, minlength=len(gold))
    report = classification_report([gold[i] for i in draw], [predicted[i] for i in draw], mode="strict", scheme=IOB2,
                                   output_dict=True, zero_division=0)
    assert weights @ numerator / (weights @ denominator) == pytest.approx(report["micro avg"]["f1-score"], rel=1e-12)


def test_lengths_must_match():
    codes = TagCodes.of(["O", "B-PER", "I-PER"])
    with pytest.raises(ValueError, match="3 predicted and 2 gold tags for 2 words"):
        EntityCounts.of(np.array([0, 1]), np.array([0, 1, 2]), np.array([2]), codes)
