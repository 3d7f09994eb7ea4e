"""Sequence classification, the task kind of a label per text: the classifier on a pretrained
encoder, its batches, predictions, linear-probe head (LP-FT) and result (accuracy and macro-F1);
also the pieces every kind shares (a head model on an encoder, the probe head, eval batches)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np
import torch
from transformers import AutoModelForSequenceClassification, PreTrainedModel, PreTrainedTokenizerBase

from bert_mlm.core.common.device import autocast
from bert_mlm.core.finetune.labelled import EncodedExamples, Task, encode_examples
from bert_mlm.core.finetune.result import (
    PRETRAINED,
    UNKNOWN_WARNING_RATE,
    ModelScores,
    TaskResult,
    interval,
    paired_result,
    seed_estimate,
)
from bert_mlm.core.model.construction import MODEL_LOCK

logger = logging.getLogger(__name__)


def head_model(auto_class, encoder: PreTrainedModel, labels: list[str], seed: int) -> PreTrainedModel:
    """``auto_class`` (``AutoModelForSequenceClassification``, ``...ForTokenClassification``) on
    ``encoder``'s weights, its label names set (so that a saved model works in a plain
    ``transformers`` pipeline). The head is drawn from ``seed`` alone: the pretrained model and
    its baselines start from the same head."""
    config = encoder.config.__class__.from_dict(encoder.config.to_dict())
    config.num_labels, config.architectures = len(labels), None
    config.id2label, config.label2id = dict(enumerate(labels)), {label: i for i, label in enumerate(labels)}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        with MODEL_LOCK:  # transformers' process-wide patches while a model is built (core.model.construction)
            model = auto_class.from_config(config)
    missing, unexpected = model.base_model.load_state_dict(encoder.base_model.state_dict(), strict=False)
    stray = [key for key in [*missing, *unexpected] if not key.startswith("pooler.")]  # a masked LM has no pooler
    if stray:
        raise ValueError(f"finetune: the encoder's weights do not fit a {auto_class.__name__} of its config: "
                         f"{stray[:5]}")
    return model


def probe_head(model: PreTrainedModel, features: np.ndarray, targets: np.ndarray, seed: int) -> None:
    """Linear probing: set the classifier layer to a logistic regression (scikit-learn's, L2, C=1)
    fitted on the frozen encoder's features of the training examples (LP-FT, Kumar et al. 2022).
    The features are standardised for the fit and the scaling folded back into the layer: lbfgs
    converged in 109 iterations instead of 445 on 21,263 NER pieces of a 256-wide encoder (16.9 s
    against 68.9 s), to a slightly better fit."""
    from sklearn.linear_model import LogisticRegression  # imported when used: ~50 MB with SciPy

    mean, scale = features.mean(0), features.std(0) + 1e-6
    probe = LogisticRegression(max_iter=2000, random_state=seed).fit((features - mean) / scale, targets)
    weight = probe.coef_ / scale  # W z + b with z = (x - mean) / scale, as a layer on x
    bias = probe.intercept_ - weight @ mean
    if weight.shape[0] == 1:  # two classes: scikit-learn keeps one logit difference; split it in two
        weight, bias = np.vstack([-weight / 2, weight / 2]), np.array([-bias[0] / 2, bias[0] / 2])
    # A label no training piece has (the I- of a type seen only in one-word entities) starts far below the others.
    full_weight = np.zeros(tuple(model.classifier.weight.shape))
    full_bias = np.full(model.classifier.bias.shape[0], bias.min() - 10.0)
    full_weight[probe.classes_], full_bias[probe.classes_] = weight, bias
    with torch.no_grad():
        model.classifier.weight.copy_(torch.as_tensor(full_weight, dtype=model.classifier.weight.dtype))
        model.classifier.bias.copy_(torch.as_tensor(full_bias, dtype=model.classifier.bias.dtype))


def ordered_batches(lengths: np.ndarray, collate: Callable[[np.ndarray], dict], device: torch.device,
                    batch_size: int = 64):
    """(indices, model inputs on ``device``) of every example, longest first (little padding)."""
    order = np.argsort(-lengths, kind="stable")
    for start in range(0, len(order), batch_size):
        indices = order[start : start + batch_size]
        yield indices, {k: v.to(device) for k, v in collate(indices).items()}


def padded(rows: list[list[int]], indices: np.ndarray, fill: int) -> torch.Tensor:
    """``rows[indices]`` padded with ``fill`` to the longest of them, rounded up to a multiple of 8."""
    width = -(-max(len(rows[i]) for i in indices) // 8) * 8
    batch = torch.full((len(indices), width), fill, dtype=torch.long)
    for row, index in enumerate(indices):
        batch[row, : len(rows[index])] = torch.tensor(rows[index])
    return batch


def collate(examples: EncodedExamples, indices: np.ndarray, pad_id: int) -> dict[str, torch.Tensor]:
    """One batch of examples, padded (a text never holds the padding token: the mask is where it is not)."""
    input_ids = padded(examples.input_ids, indices, pad_id)
    return {"input_ids": input_ids, "attention_mask": (input_ids != pad_id).long(),
            "token_type_ids": padded(examples.token_type_ids, indices, 0),
            "labels": torch.as_tensor(examples.labels[indices])}


def pooled(model: PreTrainedModel, batch: dict[str, torch.Tensor], pooling: str) -> torch.Tensor:
    """What the classifier layer reads: the [CLS] state through BERT's pooler (``cls``), or the
    mean of the last hidden states over the real tokens (``mean``)."""
    output = model.base_model(**{k: v for k, v in batch.items() if k != "labels"})
    if pooling == "cls":
        return output.pooler_output
    weights = batch["attention_mask"].unsqueeze(-1).to(output.last_hidden_state.dtype)
    return (output.last_hidden_state * weights).sum(1) / weights.sum(1)


def macro_f1(labels: np.ndarray, predictions: np.ndarray, classes: int) -> float:
    from sklearn.metrics import f1_score  # imported when used: SciPy and scikit-learn weigh ~50 MB

    return float(f1_score(labels, predictions, labels=list(range(classes)), average="macro", zero_division=0))


def unknown_rate(input_ids: list[list[int]], tokenizer: PreTrainedTokenizerBase) -> float:
    """The share of ``tokenizer.unk_token_id`` among the tokens of ``input_ids`` that are not
    special tokens ([CLS], [SEP], padding)."""
    ids = np.fromiter((i for ids in input_ids for i in ids), dtype=np.int64)
    text = ids[~np.isin(ids, list(set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}))]
    return float((text == tokenizer.unk_token_id).mean()) if len(text) else 0.0


def warn_if_unknown(rate: float, what: str, reader: str, unk_token: str) -> None:
    """Where more than :data:`~.result.UNKNOWN_WARNING_RATE` of ``what`` (a task's tokens, words)
    are [UNK], the ``reader`` (classifier, tagger) barely sees them: a warning."""
    if rate > UNKNOWN_WARNING_RATE:
        logger.warning("finetune: %.1f %% of %s are %s under the model's vocabulary (more than %.0f %%): the %s barely "
                       "sees them, so its result says little about pretraining. Is finetune.train_path in the language "
                       "and script the model's vocabulary was built for?", 100 * rate, what, unk_token,
                       100 * UNKNOWN_WARNING_RATE, reader)


@dataclass
class PreparedTask:
    """A sequence task's examples encoded once with the tokenizer every compared model shares, and
    how its classifier reads them (``pooling``): what :class:`~core.finetune.runs.Runner` runs."""

    kind: ClassVar[str] = "sequence"
    metric: ClassVar[str] = "accuracy"

    task: Task
    train: EncodedExamples
    evaluation: EncodedExamples
    pad_id: int
    unknown_rate: float = 0.0  # share of the labelled text's tokens that are [UNK] (specials not counted)
    pooling: str = "mean"

    @classmethod
    def build(cls, task: Task, tokenizer: PreTrainedTokenizerBase, max_length: int,
              pooling: str = "mean") -> PreparedTask:
        train = encode_examples(task, task.train, tokenizer, max_length)
        evaluation = encode_examples(task, task.evaluation, tokenizer, max_length)
        rate = unknown_rate([*train.input_ids, *evaluation.input_ids], tokenizer)
        warn_if_unknown(rate, "the labelled text's tokens", "classifier", tokenizer.unk_token)
        return cls(task, train, evaluation, tokenizer.pad_token_id, rate, pooling)

    @property
    def units(self) -> int:
        """What each run predicts: a class per eval example."""
        return len(self.evaluation)

    def model(self, encoder: PreTrainedModel, seed: int) -> PreTrainedModel:
        return head_model(AutoModelForSequenceClassification, encoder, self.task.labels, seed)

    def batch(self, indices: np.ndarray) -> dict[str, torch.Tensor]:
        return collate(self.train, indices, self.pad_id)

    def logits(self, model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The pooled vector through the model's dropout and classifier layers (with ``cls``, what
        ``AutoModelForSequenceClassification`` itself computes)."""
        return model.classifier(model.dropout(pooled(model, batch, self.pooling)))

    def _eval_batches(self, examples: EncodedExamples, device: torch.device):
        return ordered_batches(examples.lengths, lambda i: collate(examples, i, self.pad_id), device, 128)

    @torch.no_grad()
    def predict(self, model: PreTrainedModel, device: torch.device, amp_dtype: torch.dtype | None) -> np.ndarray:
        """The predicted class of every eval example, in eval mode."""
        model.eval()
        predictions = np.empty(len(self.evaluation), dtype=np.int64)
        for indices, batch in self._eval_batches(self.evaluation, device):
            with autocast(device, amp_dtype):
                predictions[indices] = self.logits(model, batch).argmax(-1).cpu().numpy()
        return predictions

    @torch.no_grad()
    def fit_head(self, model: PreTrainedModel, device: torch.device, amp_dtype: torch.dtype | None, seed: int) -> None:
        """The classifier layer as a linear probe on the frozen model's pooled training vectors."""
        model.eval()
        features = np.zeros((len(self.train), model.config.hidden_size), dtype=np.float32)
        for indices, batch in self._eval_batches(self.train, device):
            with autocast(device, amp_dtype):
                features[indices] = pooled(model, batch, self.pooling).float().cpu().numpy()
        probe_head(model, features, self.train.labels, seed)

    def scores(self, predictions: np.ndarray) -> dict[str, float]:
        labels = self.evaluation.labels
        return {"accuracy": float((predictions == labels).mean()),
                "macro_f1": macro_f1(labels, predictions, len(self.task.labels))}

    def result(self, scores: Mapping[str, ModelScores], baselines: Mapping[str, str], **facts) -> TaskResult:
        """Accuracy (its error from the seeds and the examples) and macro-F1 (from the seeds) of each
        model, the paired accuracy gain over each baseline, and the sentence that says it, warning
        where the model is no better than the majority class or barely sees the text."""
        labels, task = self.evaluation.labels, self.task
        correct = {name: (score.predictions == labels[None, :]).astype(np.float64) for name, score in scores.items()}
        models = {name: {"accuracy": interval(right.mean(1), right.mean(0)),
                         "macro_f1": seed_estimate([macro_f1(labels, row, len(task.labels))
                                                    for row in scores[name].predictions])}
                  for name, right in correct.items()}
        gains = {name: interval((difference := correct[PRETRAINED] - correct[name]).mean(1), difference.mean(0))
                 for name in baselines}
        majority = task.label_ids[task.train["label"].mode().iloc[0]]
        majority_rate, accuracy = float((labels == majority).mean()), models[PRETRAINED]["accuracy"]
        result = paired_result(models, gains, baselines, example_scores=correct[PRETRAINED].mean(0).tolist(),
                               classes=len(task.labels), majority_accuracy=majority_rate,
                               no_better_than_majority=bool(accuracy.low <= majority_rate), **facts)
        cautions = []
        if result.no_better_than_majority:
            label = task.labels[majority]
            cautions.append(
                f"the fine-tuned model is no better than always answering {label!r} ({majority_rate:.4f} of the eval "
                "examples)" if accuracy.mean <= majority_rate else
                f"the fine-tuned model is not distinguishable from always answering {label!r} ({majority_rate:.4f} "
                f"of the eval examples lies inside its 95 % CI {accuracy.low:.4f}-{accuracy.high:.4f})")
            logger.warning("finetune: %s", cautions[-1])
        if (result.unknown_rate or 0.0) > UNKNOWN_WARNING_RATE:  # logged, at length, when the task was prepared
            cautions.append(f"{100 * result.unknown_rate:.0f} % of the labelled text's tokens are unknown to the "
                            "model's vocabulary")
        return replace(result, summary=result.headline() + "".join(f"; WARNING: {caution}" for caution in cautions))
