"""A training run's step records: one row of the history per optimizer step, made from the device's
values a window of steps at a time (:class:`RecordWindow`: one host sync per window, not per step)."""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, fields

import pandas as pd
import torch

from bert_mlm.config import TrainingConfig
from bert_mlm.core.common.curves import publish
from bert_mlm.core.common.progress import Progress
from bert_mlm.core.model.distributed import Rank

logger = logging.getLogger(__name__)


class NonFiniteLossError(RuntimeError):
    """The loss stayed NaN/inf for too many consecutive steps."""


@dataclass(kw_only=True)
class StepRecord:
    """One optimizer step's row of the training history, its fields the columns in order (read by
    these names; checkpoints keep :meth:`as_dict`). ``loss`` to ``loss_scale`` are filled when the
    window is read, the validation columns on a validated step only (None: not in its row)."""

    step: int
    epoch: int
    loss: float = math.nan  # mean cross-entropy over the step's masked tokens
    accuracy: float = math.nan
    masked_tokens: int
    mask_probability: float
    tokens: int
    learning_rate: float
    grad_norm: float = math.nan
    tokens_per_second: float = 0.0
    seconds: float = 0.0
    loss_scale: float = 1.0
    valid_loss: float | None = None
    valid_loss_se: float | None = None
    valid_accuracy: float | None = None
    valid_masked_tokens: int | None = None
    valid_seconds: float | None = None
    valid_frequent_share: float | None = None  # the unigram plateau's measures (core.evaluate.result)
    valid_baseline_accuracy: float | None = None

    def as_dict(self) -> dict:
        return {name: value for name, value in vars(self).items() if value is not None}


# Records read back from a checkpoint (JSON, keys sorted) are put back in this order.
HISTORY_COLUMNS = tuple(column.name for column in fields(StepRecord))


def history_frame(records: list[dict]) -> pd.DataFrame:
    """The per-step history; validation columns hold NaN on the steps without one."""
    frame = pd.DataFrame.from_records(records)
    return frame[[c for c in HISTORY_COLUMNS if c in frame] + [c for c in frame if c not in HISTORY_COLUMNS]]


class RecordWindow:
    """The steps since the last record, whose device values (loss, correct predictions, gradient
    norm, divergence, loss scale) the host reads in one sync per window (``training.record_every``,
    or sooner when a validation, a checkpoint or a callback needs them): their rates, the
    non-finite streak that stops a diverged run, the progress line, the history and live curves."""

    def __init__(self, config: TrainingConfig, device: torch.device, rank: Rank, first_step: int) -> None:
        self.config, self.device, self.is_main = config, device, rank.is_main
        self.every = config.record_window(device)
        # One rate, in tokens/s, over the window and since this run started (a per-window rate
        # beside a cumulative steps/s read as one number jumping 10x between lines).
        self.progress = Progress(config.max_steps, "training", unit="step", enabled=config.progress and rank.is_main,
                                 initial=first_step, speed=False)
        self.pending: list[tuple[StepRecord, tuple]] = []
        self.nonfinite_streak = 0
        self.run_tokens = self.run_seconds = 0.0
        self.started = time.perf_counter()

    def add(self, record: StepRecord, device_values: tuple) -> None:
        """A step's record and its values still on the device (read with the window's others)."""
        self.pending.append((record, device_values))

    def due(self, step: int) -> bool:
        return step % self.every == 0 or step == self.config.max_steps

    def restart(self) -> None:
        """The window's clock starts now: what ran since (a validation, a callback) is not training time."""
        self.started = time.perf_counter()

    def read(self) -> list[StepRecord]:
        """The pending steps' records. The window's wall time (batch assembly and masking included:
        throughput is what a user gets) is shared by its steps by tokens."""
        # float32: every value is a float32 (or exact small integer) already, so nothing is rounded.
        values = torch.stack([torch.as_tensor(value, dtype=torch.float32, device=self.device).reshape(())
                              for _, device_values in self.pending for value in device_values]).tolist()
        now = time.perf_counter()
        window_tokens = max(sum(record.tokens for record, _ in self.pending), 1)
        records = [record for record, _ in self.pending]
        for index, record in enumerate(records):
            loss, correct, record.grad_norm, diverged, record.loss_scale = values[index * 5:(index + 1) * 5]
            record.loss, record.accuracy = loss / record.masked_tokens, correct / record.masked_tokens
            record.seconds = (now - self.started) * record.tokens / window_tokens
            record.tokens_per_second = record.tokens / record.seconds if record.seconds > 0 else 0.0
            self.count_nonfinite(record.step, bool(diverged))
        self.pending, self.started = [], now
        tokens, seconds = sum(r.tokens for r in records), sum(r.seconds for r in records)
        self.run_tokens, self.run_seconds = self.run_tokens + tokens, self.run_seconds + seconds
        self.progress.update(len(records), seconds=seconds, loss=f"{records[-1].loss:.4f}",
                             lr=f"{records[-1].learning_rate:.2e}",
                             **{"tokens/s (window)": f"{tokens / max(seconds, 1e-9):,.0f}",
                                "tokens/s (since start)": f"{self.run_tokens / max(self.run_seconds, 1e-9):,.0f}"})
        return records

    def count_nonfinite(self, step: int, diverged: bool) -> None:
        if diverged:
            logger.warning("training: non-finite gradient or loss at step %d; step skipped", step)
        self.nonfinite_streak = self.nonfinite_streak + 1 if diverged else 0
        if self.nonfinite_streak >= self.config.max_nonfinite_steps:
            raise NonFiniteLossError(f"training: the loss was non-finite for {self.nonfinite_streak} consecutive steps "
                                     f"(last at step {step}); stopping. The last good checkpoint is kept in "
                                     f"{self.config.checkpoint_dir!r}. Lower training.learning_rate or use fp32/bf16.")

    def publish(self, records: list[StepRecord], history: list[dict]) -> list[dict]:
        """The records as history rows, appended to ``history`` (the position's, which checkpoints
        keep) and, on rank 0, published to the live curves (TensorBoard)."""
        rows = [record.as_dict() for record in records]
        history.extend(rows)
        if self.is_main:
            publish(rows)
        return rows

    def close(self) -> None:
        self.progress.close()
