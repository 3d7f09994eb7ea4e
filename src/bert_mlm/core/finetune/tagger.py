"""Token classification (named entities), the task kind of a tag per word: the tagger on a
pretrained encoder (``AutoModelForTokenClassification``), its batches, its word-level predictions
(:mod:`core.finetune.alignment`), its linear-probe head, and its result: entity F1, strict IOB2
(:mod:`core.finetune.entities`), whose interval is a paired bootstrap over the eval sentences
(:func:`core.common.statistics.ratio_interval`), since an entity F1 is no mean of per-sentence scores.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np
import torch
from transformers import AutoModelForTokenClassification, PreTrainedModel, PreTrainedTokenizerFast

from bert_mlm.core.common.device import autocast
from bert_mlm.core.common.statistics import ratio_interval
from bert_mlm.core.finetune.alignment import IGNORED, AlignedSentences, align
from bert_mlm.core.finetune.classifier import head_model, ordered_batches, padded, probe_head, warn_if_unknown
from bert_mlm.core.finetune.entities import EntityCounts, TagCodes
from bert_mlm.core.finetune.result import (
    PRETRAINED,
    UNKNOWN_WARNING_RATE,
    ModelScores,
    TaskResult,
    paired_result,
    seed_estimate,
)
from bert_mlm.core.finetune.tag_schemes import OUTSIDE
from bert_mlm.core.finetune.tagged import TaggedTask

logger = logging.getLogger(__name__)


def collate_tagged(sentences: AlignedSentences, indices: np.ndarray, pad_id: int) -> dict[str, torch.Tensor]:
    """One batch of sentences, padded; padding's labels are ignored."""
    input_ids = padded(sentences.input_ids, indices, pad_id)
    return {"input_ids": input_ids, "attention_mask": (input_ids != pad_id).long(),
            "labels": padded(sentences.labels, indices, IGNORED)}


@torch.no_grad()
def predict_tags(model: PreTrainedModel, sentences: AlignedSentences, pad_id: int, device: torch.device,
                 amp_dtype: torch.dtype | None, outside: int) -> np.ndarray:
    """Each word's predicted label id (its first piece's), flattened over the sentences, in eval mode."""
    model.eval()
    pieces: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * len(sentences)
    for indices, batch in ordered_batches(sentences.lengths, lambda i: collate_tagged(sentences, i, pad_id), device):
        batch.pop("labels")
        with autocast(device, amp_dtype):
            predicted = model(**batch).logits.argmax(-1).cpu().numpy()
        for row, index in enumerate(indices):
            pieces[index] = predicted[row]
    return sentences.word_predictions(pieces, outside)


def linearised_f1(counts: list[EntityCounts]) -> np.ndarray:
    """Per eval sentence, its share of the micro entity F1 (averaged over the seeds): the F1 plus the
    sentence's deviation from it, (2 tp - F1 (predicted + gold)) / the mean of (predicted + gold),
    the delta method's linearisation of a ratio of sums. Its mean is the F1 and its spread the
    sentences' error, so that two models' sentences pair as a sequence task's examples do."""
    values = []
    for found in counts:
        numerator, denominator = found.micro_f1_parts()
        f1 = numerator.sum() / denominator.sum() if denominator.sum() else 0.0
        scale = denominator.mean() if len(denominator) and denominator.mean() else 1.0
        values.append(f1 + (numerator - f1 * denominator) / scale)
    return np.mean(values, axis=0)


@dataclass
class PreparedTagging:
    """A token task's sentences aligned once to the pieces of the tokenizer every compared model
    shares, and the eval sentences' gold tags (word ids, flattened): what
    :class:`~core.finetune.runs.Runner` runs."""

    kind: ClassVar[str] = "token"
    metric: ClassVar[str] = "entity_f1"

    task: TaggedTask
    train: AlignedSentences
    evaluation: AlignedSentences
    gold: np.ndarray
    codes: TagCodes
    pad_id: int
    label_all_pieces: bool = False
    unknown_rate: float = 0.0  # share of the eval words that are [UNK] alone

    @classmethod
    def build(cls, task: TaggedTask, tokenizer: PreTrainedTokenizerFast, max_length: int,
              label_all_pieces: bool = False) -> PreparedTagging:
        train, evaluation = (align(frame["tokens"].tolist(), task.tag_ids(frame), task.labels, tokenizer, max_length,
                                   label_all_pieces) for frame in (task.train, task.evaluation))
        for split, aligned in (("train", train), ("eval", evaluation)):
            logger.info("finetune: %s", aligned.report.describe(split))
        rate = evaluation.report.unknown_rate
        warn_if_unknown(rate, "the eval words", "tagger", tokenizer.unk_token)
        gold = np.fromiter((i for ids in task.tag_ids(task.evaluation) for i in ids), dtype=np.int64)
        return cls(task, train, evaluation, gold, TagCodes.of(task.labels), tokenizer.pad_token_id, label_all_pieces,
                   rate)

    @property
    def units(self) -> int:
        """What each run predicts: a label per eval word."""
        return int(self.evaluation.word_counts.sum())

    def counts(self, predictions: np.ndarray) -> EntityCounts:
        return EntityCounts.of(self.gold, predictions, self.evaluation.word_counts, self.codes)

    def model(self, encoder: PreTrainedModel, seed: int) -> PreTrainedModel:
        return head_model(AutoModelForTokenClassification, encoder, self.task.labels, seed)

    def batch(self, indices: np.ndarray) -> dict[str, torch.Tensor]:
        return collate_tagged(self.train, indices, self.pad_id)

    def logits(self, model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return model(**{k: v for k, v in batch.items() if k != "labels"}).logits

    def predict(self, model: PreTrainedModel, device: torch.device, amp_dtype: torch.dtype | None) -> np.ndarray:
        return predict_tags(model, self.evaluation, self.pad_id, device, amp_dtype, self.task.labels.index(OUTSIDE))

    @torch.no_grad()
    def fit_head(self, model: PreTrainedModel, device: torch.device, amp_dtype: torch.dtype | None, seed: int) -> None:
        """The classifier layer as a linear probe on the frozen encoder's hidden states of the labelled pieces."""
        model.eval()
        features, targets = [], []
        for _, batch in ordered_batches(self.train.lengths, self.batch, device):
            labels = batch.pop("labels")
            with autocast(device, amp_dtype):
                hidden = model.base_model(**batch).last_hidden_state
            keep = labels != IGNORED
            features.append(hidden[keep].float().cpu().numpy())
            targets.append(labels[keep].cpu().numpy())
        probe_head(model, np.concatenate(features), np.concatenate(targets), seed)

    def scores(self, predictions: np.ndarray) -> dict[str, float]:
        """Entity F1 (the headline), precision, recall, token accuracy, and each entity type's F1."""
        found = self.counts(predictions).scores()
        return {"entity_f1": found["f1"], "entity_precision": found["precision"], "entity_recall": found["recall"],
                "token_accuracy": found["token_accuracy"],
                **{f"f1_{kind}": values["f1"] for kind, values in found["per_type"].items()}}

    def result(self, scores: Mapping[str, ModelScores], baselines: Mapping[str, str], **facts) -> TaskResult:
        """Each model's entity F1 (its interval: the paired bootstrap over sentences with the seeds'
        spread), precision, recall and token accuracy (from the seeds), the paired entity-F1 gain
        over each baseline, each type's F1 (``detail``), and the sentence that says it."""
        counts = {name: [self.counts(row) for row in score.predictions] for name, score in scores.items()}

        def f1_parts(name: str) -> tuple[np.ndarray, np.ndarray]:
            numerators, denominators = zip(*(found.micro_f1_parts() for found in counts[name]), strict=True)
            return np.stack(numerators), np.stack(denominators)

        seeds = {name: [found.scores() for found in counts[name]] for name in counts}
        models = {name: {"entity_f1": replace(ratio_interval(*f1_parts(name)), seeds=[s["f1"] for s in seeds[name]]),
                         **{metric: seed_estimate([s[measure] for s in seeds[name]]) for metric, measure in (
                             ("entity_precision", "precision"), ("entity_recall", "recall"),
                             ("token_accuracy", "token_accuracy"))}}
                  for name in counts}
        gains = {name: ratio_interval(*f1_parts(PRETRAINED), f1_parts(name)) for name in baselines}
        types = self.codes.types
        detail = {"labels": self.task.labels, "label_all_pieces": self.label_all_pieces, "scored_words": self.units,
                  "truncated_words": self.evaluation.report.truncated,
                  "gold_entities": dict(zip(types, map(int, counts[PRETRAINED][0].gold.sum(0)), strict=True)),
                  "entity_f1_per_type": {name: {kind: float(np.mean([s["per_type"][kind]["f1"] for s in seeds[name]]))
                                                for kind in types} for name in counts}}
        result = paired_result(models, gains, baselines, example_scores=linearised_f1(counts[PRETRAINED]).tolist(),
                               kind=self.kind, metric=self.metric, classes=len(self.task.labels), detail=detail,
                               **facts)
        warning = (f"; WARNING: {100 * self.unknown_rate:.0f} % of the eval words are unknown to the model's "
                   "vocabulary") if self.unknown_rate > UNKNOWN_WARNING_RATE else ""
        return replace(result, summary=result.headline() + warning)
