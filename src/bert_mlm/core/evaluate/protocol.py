"""Fixed-protocol evaluation, so that runs (and tuning trials) are comparable.

The protocol: the held-out sequences are visited in one fixed random order (seeded from
``evaluation.seed``), ``MASK_BLOCK`` at a time, and masked at ``evaluation.mask_probability`` with
BERT's 80/10/10 replacement by generators seeded from ``evaluation.seed``, the draw and the block.
Draws repeat the pass with fresh masks, up to ``evaluation.mask_draws``; the evaluation stops
after the first block that brings the masked tokens to ``evaluation.min_masked_tokens``, so its
cost is bounded whatever the size of the held-out data (a prefix of a random order is a random
sample of sequences). The masks and the stopping point depend only on the data and the protocol,
never on the model, the training mask rate, the batch size or the device; every model evaluated
on the same data sees identical masks. Metrics are token-weighted over all masked tokens.

The masked set is made block by block while it is evaluated, so a large held-out split costs
one block of memory.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F
from transformers import BertForMaskedLM

from bert_mlm.config import EvaluationConfig, MaskingConfig
from bert_mlm.core.common.device import autocast
from bert_mlm.core.common.seeds import EVALUATION_ORDER_STREAM, EVALUATION_STREAM, stream_seed
from bert_mlm.core.common.statistics import ratio_standard_error
from bert_mlm.core.evaluate.result import FREQUENT_TOKENS, MEASURES, HeldOut
from bert_mlm.core.model.bert import MaskedPositionsMLM
from bert_mlm.core.model.masking import IGNORE_INDEX, mask_tokens
from bert_mlm.core.tokens.sequences import Collator, sequence_lengths
from bert_mlm.errors import UserError

# Sequences masked together under one generator; part of the protocol (see EVALUATION_SCHEME).
MASK_BLOCK = 256
# Bumped whenever the same protocol would draw other masks (2: per-block generators; 3: a fixed
# random order of the sequences and the min_masked_tokens stop), so that tuning studies never
# compare trials evaluated under different schemes.
EVALUATION_SCHEME = 3


def _trimmed_batches(input_ids, attention_mask, labels, sequence_ids, batch_size: int):
    for start in range(0, len(input_ids), batch_size):
        stop = start + batch_size
        width = int(attention_mask[start:stop].sum(dim=1).max())
        yield (input_ids[start:stop, :width], attention_mask[start:stop, :width], labels[start:stop, :width],
               sequence_ids[start:stop])


@dataclass
class EvaluationSet:
    """Masked held-out data held in memory: inputs, attention masks, labels, and which held-out
    sequence each row is (several mask draws of one sequence share its id)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    labels: torch.Tensor
    sequence_ids: torch.Tensor

    def __len__(self) -> int:
        """The distinct held-out sequences (several draws of one count once)."""
        return len(torch.unique(self.sequence_ids))

    @property
    def masked_tokens(self) -> int:
        return int((self.labels != IGNORE_INDEX).sum())

    def batches(self, batch_size: int):
        yield from _trimmed_batches(self.input_ids, self.attention_mask, self.labels, self.sequence_ids, batch_size)


class StreamedEvaluationSet:
    """Held-out sequences masked under the fixed protocol, block by block, as they are read."""

    def __init__(self, sequences: Sequence[np.ndarray], collator: Collator, mask_token_id: int,
                 replacement_ids: torch.Tensor, config: EvaluationConfig):
        self.sequences = sequences
        self.collator = replace(collator, padding="static", whole_word=config.whole_word)
        self.mask_token_id = mask_token_id
        self.replacement_ids = replacement_ids
        self.masking = MaskingConfig(config.mask_probability, 0.8, 0.1, whole_word=config.whole_word)
        self.seed = int(config.seed)
        self.draws = int(config.mask_draws)
        self.min_masked_tokens = config.min_masked_tokens

    def __len__(self) -> int:
        return len(self.sequences)

    def order(self) -> np.ndarray:
        """The fixed random order of the sequences, from the protocol's seed alone."""
        generator = torch.Generator().manual_seed(stream_seed(self.seed, 0, 0, stream=EVALUATION_ORDER_STREAM))
        return torch.randperm(len(self.sequences), generator=generator).numpy()

    def blocks(self):
        """(inputs, attention mask, labels, sequence ids) per block of sequences and mask draw, until
        ``min_masked_tokens`` are masked: a longer evaluation only adds blocks, never changes those before."""
        order, masked = self.order(), 0
        for draw in range(self.draws):
            for block, start in enumerate(range(0, len(order), MASK_BLOCK)):
                # Sorted within the block: neighbouring rows of a memory-mapped store read together.
                rows = np.sort(order[start : start + MASK_BLOCK])
                batch = self.collator.collate(self.sequences, rows)
                generator = torch.Generator().manual_seed(stream_seed(self.seed, draw, block, stream=EVALUATION_STREAM))
                inputs, labels = mask_tokens(batch["input_ids"], batch["special_tokens_mask"], self.mask_token_id,
                                             self.replacement_ids, self.masking, generator, batch.get("word_starts"))
                yield inputs, batch["attention_mask"], labels, torch.from_numpy(rows)
                masked += int((labels != IGNORE_INDEX).sum())
                if self.min_masked_tokens is not None and masked >= self.min_masked_tokens:
                    return

    def batches(self, batch_size: int):
        for block in self.blocks():
            yield from _trimmed_batches(*block, batch_size)

    def materialise(self) -> EvaluationSet:
        """The whole set in memory (small sets: tests, notebooks)."""
        inputs, attention, labels, sequence_ids = zip(*self.blocks(), strict=True)
        return EvaluationSet(torch.cat(inputs), torch.cat(attention), torch.cat(labels), torch.cat(sequence_ids))

    @property
    def masked_tokens(self) -> int:
        return sum(int((labels != IGNORE_INDEX).sum()) for _, _, labels, _ in self.blocks())


def prepare_evaluation_set(sequences: Sequence[np.ndarray], collator: Collator, mask_token_id: int,
                           replacement_ids: torch.Tensor, config: EvaluationConfig) -> StreamedEvaluationSet:
    if not len(sequences):
        raise UserError("evaluation: there are no held-out sequences to evaluate on")
    if config.max_sequences:
        sequences = sequences[: config.max_sequences]
    if int(sequence_lengths(sequences).max()) > collator.max_length:
        raise UserError(f"evaluation: a sequence exceeds sequences.max_length={collator.max_length}")
    return StreamedEvaluationSet(sequences, collator, mask_token_id, replacement_ids, config)


def evaluation_dtype(device: torch.device) -> torch.dtype | None:
    """bf16 autocast on GPUs that support it; fp32 elsewhere (CPUs without native bf16 run its
    matmuls ~140x slower than fp32: measured on this project's 2-core machine)."""
    return torch.bfloat16 if device.type == "cuda" and torch.cuda.is_bf16_supported() else None


AUTO = "auto"


@dataclass(frozen=True)
class SequenceScores:
    """One model's scores on one evaluation set, summed per held-out sequence: what every metric
    and its standard error is computed from, and what pairs two models scored on the same masks
    (:func:`paired_change`). Rows are the distinct sequences scored, in ``sequence_ids`` order."""

    sequence_ids: np.ndarray
    tokens: np.ndarray  # masked tokens of each sequence (all its draws)
    loss: np.ndarray  # summed cross-entropy
    top1: np.ndarray  # correct top-1 predictions
    top5: np.ndarray
    mask_draws: int  # draws begun (the last may be partial)
    frequent: np.ndarray | None = None  # top-1 predictions among the most frequent training tokens

    def summary(self) -> HeldOut:
        """The token-weighted means, each with its standard error (see :func:`evaluate`)."""
        count = int(self.tokens.sum())
        values: dict[str, float] = {}
        for name in MEASURES:
            values[name] = float(self.summed(name).sum() / count)
            values[f"{name}_se"] = ratio_standard_error(self.summed(name), self.tokens, values[name])
        share = None if self.frequent is None else float(self.frequent.sum() / count)
        return HeldOut(**values, perplexity=math.exp(min(values["loss"], 700.0)), masked_tokens=count,
                       sequences=len(self.tokens), mask_draws=self.mask_draws, frequent_share=share)

    def summed(self, name: str) -> np.ndarray:
        """The per-sequence sums of one of :data:`~bert_mlm.core.evaluate.result.MEASURES`."""
        return {"loss": self.loss, "accuracy": self.top1, "top5_accuracy": self.top5}[name]


@torch.inference_mode()
def score_sequences(model: BertForMaskedLM, evaluation_set: EvaluationSet | StreamedEvaluationSet,
                    batch_size: int = 128, device: torch.device | str | None = None,
                    amp_dtype: torch.dtype | None | str = AUTO, frequent_ids: Sequence[int] = ()) -> SequenceScores:
    """``model``'s summed loss and top-1/top-5 hits at the masked positions, per held-out
    sequence. ``amp_dtype``: an autocast dtype, ``None`` for fp32, or ``"auto"``
    (:func:`evaluation_dtype`). ``frequent_ids``: also count the top-1 predictions among them."""
    device = torch.device(device) if device is not None else next(model.parameters()).device
    if amp_dtype == AUTO:
        amp_dtype = evaluation_dtype(device)
    was_training = model.training
    model.eval()
    mlm = MaskedPositionsMLM(model)
    sums: dict[str, list[torch.Tensor]] = {"loss": [], "top1": [], "top5": [], "frequent": [], "sequence": []}
    frequent = torch.as_tensor(list(frequent_ids), dtype=torch.long, device=device)
    rows_seen: list[torch.Tensor] = []
    for inputs, attention_mask, labels, sequence_ids in evaluation_set.batches(batch_size):
        rows_seen.append(sequence_ids)
        with autocast(device, amp_dtype):
            logits, targets = mlm(inputs.to(device), attention_mask.to(device), labels.to(device))
        if targets.numel() == 0:
            continue
        logits = logits.float()
        rows = sequence_ids[(labels != IGNORE_INDEX).nonzero()[:, 0]]  # the order of the gathered positions
        best5 = logits.topk(min(5, logits.shape[-1]), dim=-1).indices
        sums["loss"].append(F.cross_entropy(logits, targets, reduction="none").double().cpu())
        sums["top1"].append((best5[:, 0] == targets).double().cpu())
        sums["top5"].append((best5 == targets[:, None]).any(dim=-1).double().cpu())
        sums["frequent"].append(torch.isin(best5[:, 0], frequent).double().cpu())
        sums["sequence"].append(rows)
    if was_training:
        model.train()
    if not sums["sequence"]:
        raise UserError("evaluation: no token was masked; the held-out data is too small")
    sequence_ids, cluster = np.unique(torch.cat(sums["sequence"]).numpy(), return_inverse=True)
    per_sequence = {name: np.bincount(cluster, weights=torch.cat(sums[name]).numpy())
                    for name in ("loss", "top1", "top5", "frequent")}
    if not len(frequent):
        per_sequence["frequent"] = None
    return SequenceScores(sequence_ids, np.bincount(cluster).astype(np.float64), **per_sequence,
                          mask_draws=int(np.bincount(torch.cat(rows_seen).numpy()).max()))


def evaluate(model: BertForMaskedLM, evaluation_set: EvaluationSet | StreamedEvaluationSet, batch_size: int = 128,
             device: torch.device | str | None = None, amp_dtype: torch.dtype | None | str = AUTO,
             frequent_ids: Sequence[int] = ()) -> dict[str, float]:
    """:func:`score_sequences`' token-weighted loss, perplexity, top-1 and top-5 accuracy, each with
    its standard error (``*_se``), and what they rest on, as the JSON files name them (``eval_loss``).

    The standard errors are analytic: masked tokens of one sequence are not independent (they
    share a context, and several mask draws share the sequence), so each metric, a ratio of sums
    over sequences, gets the delta-method (linearised) standard error with sequences as
    clusters: ``SE(R) = sqrt(sum_i (y_i - R n_i)^2 / (m (m - 1))) / mean(n)`` over the ``m``
    sequences, ``y_i`` a sequence's summed loss (or hits) and ``n_i`` its masked tokens. No
    resampling, and the same numbers as a bootstrap over sequences up to its noise.
    """
    return score_sequences(model, evaluation_set, batch_size, device, amp_dtype, frequent_ids).summary().to_json()


def paired_change(after: SequenceScores, before: SequenceScores) -> HeldOut:
    """``after``'s scores with the starting model's (``before``, ``loss_start``...) on the same
    evaluation set, and each score's change (``loss_change``) with its paired standard error.

    The change is one ratio of summed per-sequence differences, ``D = sum_i (y_i - x_i) / sum_i n_i``,
    with the delta-method error of :func:`~bert_mlm.core.common.statistics.ratio_standard_error`
    over those differences. What the two models share (hard sequences, rare words) cancels, so this
    error is far below that of two independent scores.
    """
    if not (np.array_equal(after.sequence_ids, before.sequence_ids) and np.array_equal(after.tokens, before.tokens)):
        raise ValueError("paired_change: the two scores are not of the same masked tokens (another evaluation set)")
    start, change = before.summary(), {}
    for name in MEASURES:
        difference = after.summed(name) - before.summed(name)
        ratio = float(difference.sum() / after.tokens.sum())
        change.update({f"{name}_start": getattr(start, name), f"{name}_start_se": getattr(start, f"{name}_se"),
                       f"{name}_change": ratio,
                       f"{name}_change_se": ratio_standard_error(difference, after.tokens, ratio)})
    return replace(after.summary(), **change)


def change_sentence(held_out: HeldOut, corpus: str, forgetting: bool = False) -> str | None:
    """The before/after of :func:`paired_change` in one sentence: "continued pretraining lowered
    the held-out loss on reviews.csv from 3.91 to 3.12 (-0.79 ± 0.02; accuracy 0.212 -> 0.301)".
    None without a starting model's score. ``forgetting``: text the model is not continued on
    (general text), where a rise is what it forgot."""
    if held_out.loss_start is None:
        return None
    before, after = held_out.loss_start, held_out.loss
    change, error = held_out.loss_change, held_out.loss_change_se
    # Two decimals, as a loss is usually read, unless the standard error needs more to show.
    digits = 2 if not math.isfinite(error) or error >= 0.005 else min(4, -math.floor(math.log10(max(error, 1e-9))))
    verb = "lowered" if change < 0 else "raised" if change > 0 else "left unchanged"
    noise = " (within noise)" if math.isfinite(error) and abs(change) < 2 * error else ""
    forgot = ": what it forgot there" if forgetting and change > 0 and not noise else ""
    accuracy = f"{held_out.accuracy_start:.3f} -> {held_out.accuracy:.3f}"
    # A lower loss goes with a higher accuracy; where they move the same way, say so rather than let
    # "what it forgot" stand beside a rising accuracy (+0.30 loss, accuracy 0.104 -> 0.107).
    moved = round(held_out.accuracy - held_out.accuracy_start, 3)
    disagree = "" if noise or not moved or (moved > 0) != (change > 0) else (
        f"; the loss and the accuracy disagree: the accuracy {'rose' if moved > 0 else 'fell'} too, so the model "
        f"is {'less' if change > 0 else 'more'} sure of its answers rather than {'less' if change > 0 else 'more'} "
        "often right")
    return (f"continued pretraining {verb} the held-out loss on {corpus} from {before:.{digits}f} to "
            f"{after:.{digits}f} ({change:+.{digits}f} ± {error:.{digits}f}; accuracy {accuracy}){noise}{forgot}"
            f"{disagree}")


def most_frequent_token(train: Sequence[np.ndarray] | np.ndarray, special_ids: Sequence[int]) -> int:
    """The most frequent non-special token of the training data: ``train`` is a list of token
    arrays, or a frequency per token id (a token store split's ``counts``)."""
    return frequent_tokens(train, special_ids, 1)[0]


def frequent_tokens(train: Sequence[np.ndarray] | np.ndarray, special_ids: Sequence[int],
                    count: int = FREQUENT_TOKENS) -> list[int]:
    """The ``count`` most frequent non-special tokens of the training data, the most frequent first
    (``train``: as :func:`most_frequent_token` takes it)."""
    if isinstance(train, np.ndarray) and train.ndim == 1 and train.dtype.kind in "iu":
        counts = train.astype(np.int64, copy=True)
    else:
        counts = np.bincount(
            np.concatenate([np.asarray(ids, dtype=np.int64) for ids in train] or [np.zeros(0, np.int64)])
        )
    special = [t for t in special_ids if t < len(counts)]
    counts[special] = 0
    if not len(counts) or counts.max() == 0:
        raise UserError("evaluation: the training split holds no token")
    order = np.argsort(-counts, kind="stable")[:count]
    return [int(token) for token in order if counts[token] > 0]


def baseline_accuracy(evaluation_set, token_id: int) -> float:
    """Accuracy of always predicting ``token_id`` at the masked positions."""
    hits = total = 0
    for _, _, labels, _ in evaluation_set.batches(MASK_BLOCK):
        selected = labels != IGNORE_INDEX
        total += int(selected.sum())
        hits += int((labels[selected] == token_id).sum())
    return hits / total if total else 0.0
