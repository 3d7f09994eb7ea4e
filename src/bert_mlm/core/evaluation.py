"""Fixed-protocol evaluation, so that runs (and tuning trials) are comparable.

The protocol: every held-out sequence is masked once, by a generator seeded from
``evaluation.seed``, at ``evaluation.mask_probability`` with BERT's 80/10/10 replacement. The
masks depend only on the data and the protocol, never on the model, the training mask rate, the
batch size or the device; every model evaluated on the same data sees identical masks. Metrics
are token-weighted over all masked tokens.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from transformers import BertForMaskedLM, PreTrainedTokenizerBase, pipeline

from bert_mlm.core.masking import IGNORE_INDEX, MaskingConfig, mask_tokens
from bert_mlm.core.model import MaskedPositionsMLM
from bert_mlm.core.sequences import Collator


@dataclass(frozen=True)
class EvaluationConfig:
    mask_probability: float = 0.15
    seed: int = 20231
    batch_size: int = 64
    max_sequences: int | None = None

    def __post_init__(self) -> None:
        if not 0.0 < self.mask_probability < 1.0:
            raise ValueError(f"evaluation.mask_probability: {self.mask_probability!r} must be in (0, 1)")
        if not isinstance(self.batch_size, int) or self.batch_size <= 0:
            raise ValueError(f"evaluation.batch_size: {self.batch_size!r} must be a positive integer")


@dataclass
class EvaluationSet:
    """Masked held-out data: inputs, attention masks and labels, fixed once."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    labels: torch.Tensor

    @property
    def masked_tokens(self) -> int:
        return int((self.labels != IGNORE_INDEX).sum())

    def batches(self, batch_size: int):
        for start in range(0, len(self.input_ids), batch_size):
            stop = start + batch_size
            width = int(self.attention_mask[start:stop].sum(dim=1).max())
            yield (
                self.input_ids[start:stop, :width],
                self.attention_mask[start:stop, :width],
                self.labels[start:stop, :width],
            )


def prepare_evaluation_set(
    sequences: Sequence[np.ndarray],
    collator: Collator,
    mask_token_id: int,
    replacement_ids: torch.Tensor,
    config: EvaluationConfig,
) -> EvaluationSet:
    if not sequences:
        raise ValueError("evaluation: there are no held-out sequences to evaluate on")
    chosen = list(sequences[: config.max_sequences] if config.max_sequences else sequences)
    static = Collator(collator.pad_id, collator.special_ids, collator.max_length, padding="static")
    batch = static(chosen)
    generator = torch.Generator().manual_seed(int(config.seed))
    masking = MaskingConfig(config.mask_probability, 0.8, 0.1)
    inputs, labels = mask_tokens(
        batch["input_ids"], batch["special_tokens_mask"], mask_token_id, replacement_ids, masking, generator
    )
    return EvaluationSet(inputs, batch["attention_mask"], labels)


@torch.no_grad()
def evaluate(
    model: BertForMaskedLM,
    evaluation_set: EvaluationSet,
    batch_size: int = 64,
    device: torch.device | str | None = None,
    amp_dtype: torch.dtype | None = None,
) -> dict[str, float]:
    """Token-weighted masked-token loss, perplexity, top-1 and top-5 accuracy."""
    device = torch.device(device) if device is not None else next(model.parameters()).device
    was_training = model.training
    model.eval()
    mlm = MaskedPositionsMLM(model)
    loss_sum, top1, top5, count = 0.0, 0, 0, 0
    for inputs, attention_mask, labels in evaluation_set.batches(batch_size):
        with torch.autocast(device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
            logits, targets = mlm(inputs.to(device), attention_mask.to(device), labels.to(device))
        if targets.numel() == 0:
            continue
        logits = logits.float()
        loss_sum += float(F.cross_entropy(logits, targets, reduction="sum"))
        best5 = logits.topk(min(5, logits.shape[-1]), dim=-1).indices
        top1 += int((best5[:, 0] == targets).sum())
        top5 += int((best5 == targets[:, None]).any(dim=-1).sum())
        count += int(targets.numel())
    if was_training:
        model.train()
    if count == 0:
        raise ValueError("evaluation: no token was masked; the held-out data is too small")
    loss = loss_sum / count
    return {
        "eval_loss": loss,
        "eval_perplexity": math.exp(min(loss, 700.0)),
        "eval_accuracy": top1 / count,
        "eval_top5_accuracy": top5 / count,
        "eval_masked_tokens": count,
    }


def most_frequent_token(train_documents: Sequence[np.ndarray], special_ids: Sequence[int]) -> int:
    counts = Counter()
    for ids in train_documents:
        values, freq = np.unique(ids, return_counts=True)
        counts.update(dict(zip(values.tolist(), freq.tolist(), strict=True)))
    for token in special_ids:
        counts.pop(token, None)
    if not counts:
        raise ValueError("evaluation: the training split holds no token")
    return counts.most_common(1)[0][0]


def baseline_accuracy(evaluation_set: EvaluationSet, token_id: int) -> float:
    """Accuracy of always predicting ``token_id`` at the masked positions."""
    selected = evaluation_set.labels != IGNORE_INDEX
    total = int(selected.sum())
    return float((evaluation_set.labels[selected] == token_id).sum()) / total if total else 0.0


def fill_mask_examples(
    model: BertForMaskedLM, tokenizer: PreTrainedTokenizerBase, sentences: Sequence[str], top_k: int = 5
) -> list[dict]:
    """Top-k fills of each sentence's ``[MASK]``, with the plain ``transformers`` pipeline."""
    if not sentences:
        return []
    fill = pipeline("fill-mask", model=model, tokenizer=tokenizer, device=next(model.parameters()).device)
    examples = []
    for sentence in sentences:
        if tokenizer.mask_token not in sentence:
            raise ValueError(f"evaluation.fill_mask_sentences: {sentence!r} has no {tokenizer.mask_token}")
        predictions = fill(sentence, top_k=top_k)
        if predictions and isinstance(predictions[0], list):  # several [MASK]s: keep the first
            predictions = predictions[0]
        examples.append(
            {
                "sentence": sentence,
                "predictions": [
                    {"token": p["token_str"], "score": round(float(p["score"]), 4)} for p in predictions
                ],
            }
        )
    return examples
