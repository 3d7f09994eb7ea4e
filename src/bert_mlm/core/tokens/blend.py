"""Mixtures at sample time: each epoch draws every source's sequences in proportion to its weight.

The token store holds a mixture's documents once each, source after source, and the sequence
index says where each source's sequences lie (:class:`SourceSpan`). The weights (``corpus.sources``:
``weight``, or ``repeat`` passes) are applied here, when training draws an epoch, as Megatron-LM's
``BlendedDataset`` and MosaicML streaming's ``Stream(proportion=)`` blend per-source indexes: so a
changed weight re-encodes nothing (the data stages are reused, :mod:`bert_mlm.core.data.reuse`).

- **Exact to a sequence.** An epoch has as many sequences as the store holds (weights), or each
  source's stored sequences times its ``repeat``; with weights, each source's count is its weight's
  share of the epoch by largest remainders, so it is within one sequence of ``weight x epoch``.
- **Deterministic and resumable.** A source drawn more often than it has sequences contributes all
  of them ``floor(count / stored)`` times and a uniform sample without replacement of the rest, drawn
  from (seed, epoch, source) alone; a resumed run draws the same epoch (as MosaicML's sampling
  per epoch: a thinned source shows other sequences each epoch, not one fixed subset).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from bert_mlm.core.common.seeds import MIXTURE_STREAM, stream_seed
from bert_mlm.errors import UserError

logger = logging.getLogger(__name__)

# An epoch this many times the stored sequences is said out loud (repeat: 100000 planned 17.6 G characters silently).
LARGE_EPOCH_FACTOR = 100


@dataclass(frozen=True)
class SourceSpan:
    """A source's sequences in a split's index: ``[first, stop)``."""

    name: str
    first: int
    stop: int

    @property
    def stored(self) -> int:
        return self.stop - self.first


@dataclass(frozen=True)
class MixturePlan:
    """How many sequences of each source one epoch draws (``counts``), and the settings they came from."""

    spans: tuple[SourceSpan, ...]
    counts: tuple[int, ...]
    settings: tuple[tuple[str, str, float], ...]  # (source, "weight" or "repeat", value)

    @property
    def epoch_size(self) -> int:
        return int(sum(self.counts))

    @property
    def stored(self) -> int:
        return sum(span.stored for span in self.spans)

    def sample(self, seed: int, epoch: int) -> np.ndarray:
        """The epoch's sequence indices (a multiset, in source order; training shuffles it)."""
        parts = []
        for code, (span, count) in enumerate(zip(self.spans, self.counts, strict=True)):
            whole, rest = divmod(count, span.stored)
            indices = np.arange(span.first, span.stop, dtype=np.int64)
            parts.append(np.tile(indices, whole))
            if rest:
                generator = np.random.default_rng(stream_seed(seed, epoch, code, stream=MIXTURE_STREAM))
                parts.append(span.first + np.sort(generator.choice(span.stored, rest, replace=False)))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def shares(self, sample: np.ndarray, lengths: np.ndarray) -> dict[str, dict]:
        """Each source's sequences and tokens in ``sample`` (an epoch), counted, with its stored
        sequences and its setting: what the run summary and the report show."""
        bounds = np.array([span.first for span in self.spans] + [self.spans[-1].stop])
        codes = np.searchsorted(bounds, sample, side="right") - 1
        sequences = np.bincount(codes, minlength=len(self.spans))
        tokens = np.bincount(codes, weights=np.asarray(lengths)[sample], minlength=len(self.spans))
        settings = {name: (kind, value) for name, kind, value in self.settings}
        return {
            span.name: {settings[span.name][0]: settings[span.name][1], "stored_sequences": span.stored,
                        "epoch_sequences": int(sequences[code]),
                        "share_of_sequences": float(sequences[code] / max(len(sample), 1)),
                        "share_of_tokens": float(tokens[code] / max(tokens.sum(), 1)),
                        "passes": float(sequences[code] / span.stored)}
            for code, span in enumerate(self.spans)
        }

    def describe(self) -> str:
        return ", ".join(f"{span.name} {count:,} ({count / max(self.epoch_size, 1):.1%}, x{count / span.stored:.3g} of "
                         f"{span.stored:,} stored)" for span, count in zip(self.spans, self.counts, strict=True))


def plan_mixture(spans: list[SourceSpan], settings: dict[str, tuple[str, float]] | None) -> MixturePlan:
    """Each source's sequences per epoch. ``settings`` (from
    :func:`~bert_mlm.core.data.sources.settings.source_settings`) must name the stored sources; ``None`` draws
    every stored sequence once (the store's own proportions)."""
    stored_names = [span.name for span in spans]
    if settings is None:
        settings = dict.fromkeys(stored_names, ("repeat", 1.0))
        logger.info("Mixture: corpus.sources is not set; each of the stored sources %s is drawn once per epoch",
                    stored_names)
    if sorted(settings) != sorted(stored_names):
        raise UserError(f"corpus.sources: names {sorted(settings)}, but the token store holds the sources "
                        f"{stored_names}; a source is added or removed by running the data stages again (a weight "
                        "changes without them)")
    empty = [span.name for span in spans if span.stored == 0]
    if empty:
        raise UserError(f"corpus.sources.{empty[0]}: it has no training sequence, so it cannot take a share "
                        "of training")
    if all(settings[name][0] == "weight" for name in stored_names):
        weights = np.array([settings[name][1] for name in stored_names], dtype=np.float64)
        total = sum(span.stored for span in spans)
        exact = weights / weights.sum() * total
        counts = np.floor(exact).astype(np.int64)
        # Largest remainders: the counts sum to the epoch and each is within one sequence of its share.
        counts[np.argsort(-(exact - counts), kind="stable")[: total - int(counts.sum())]] += 1
    else:
        counts = np.array([max(1, round(settings[span.name][1] * span.stored)) for span in spans], dtype=np.int64)
    plan = MixturePlan(tuple(spans), tuple(int(c) for c in counts),
                       tuple((name, *settings[name]) for name in stored_names))
    logger.info("Mixture: an epoch draws %s sequences: %s", f"{plan.epoch_size:,}", plan.describe())
    if plan.epoch_size > LARGE_EPOCH_FACTOR * plan.stored:
        logger.warning(
            "corpus.sources: an epoch of the mixture draws %s sequences, %.0fx the %s stored (%s); with "
            "training.epochs every epoch is that long: check the repeat/weight values",
            f"{plan.epoch_size:,}", plan.epoch_size / plan.stored, f"{plan.stored:,}",
            ", ".join(f"{name} {kind}={value:g}" for name, kind, value in plan.settings))
    return plan
