"""Curves where users look: the training loop's records as they are read, and a TensorBoard writer.

The loop publishes each window of step records (:func:`publish`) to whoever listens (the
TensorBoard hook), so the curves move while training runs, as the Hugging Face Trainer's
``report_to="tensorboard"`` does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from bert_mlm.errors import UserError, first_line

Listener = Callable[[Sequence[dict]], None]
_listeners: list[Listener] = []


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """``listener(records)`` receives every window of step records the training loop reads."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


def publish(records: Sequence[dict]) -> None:
    """The loop's records of one window (each with ``step``, ``loss``, ``learning_rate``, ...)."""
    for listener in list(_listeners):
        listener(records)


# A step record's validation fields (on the steps the run validated) go under valid/, the others under train/.
VALIDATION_PREFIX = "valid_"


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


class TensorBoardLog:
    """One run's event files (``torch.utils.tensorboard.SummaryWriter``) in ``directory``, read by
    ``tensorboard --logdir <its parent>``. Steps are written once each, so the live records and
    the saved history (which a data-parallel run's records reach only at its end) never repeat."""

    def __init__(self, directory: str | Path) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as error:  # torch's writer needs the tensorboard package
            raise UserError("tracking.tensorboard: needs the tensorboard package: pip install -e \".[tensorboard]\" "
                            "(or pip install tensorboard)") from error
        self.directory = Path(directory)
        try:
            self.writer = SummaryWriter(log_dir=str(self.directory))
        except OSError as error:  # a read-only or full folder: one line, before any work (was 92 lines)
            raise UserError(f"tracking.tensorboard_dir: cannot write event files in {str(self.directory)!r} "
                            f"({error.strerror or first_line(error)}); choose a writable folder") from error
        self.last_step = 0

    def records(self, records: Sequence[Mapping]) -> None:
        """Training records (the loop's, or the history's rows) after the last one written."""
        for record in records:
            step = int(record["step"])
            if step <= self.last_step:
                continue
            for field, value in record.items():  # every number the loop records: loss -> train/loss, valid_loss ...
                if field != "step" and (number := _number(value)) is not None:
                    tag = f"valid/{field.removeprefix(VALIDATION_PREFIX)}" if field.startswith(VALIDATION_PREFIX) \
                        else f"train/{field}"
                    self.writer.add_scalar(tag, number, step)
            self.last_step = step
        self.writer.flush()  # visible while the run goes, not at its end

    def scalars(self, values: Mapping[str, object], step: int) -> None:
        """``values``: tag -> value (a value that is not a finite number is left out)."""
        for tag, value in values.items():
            if (number := _number(value)) is not None:
                self.writer.add_scalar(tag, number, step)
        self.writer.flush()

    def text(self, tag: str, text: str, step: int = 0) -> None:
        self.writer.add_text(tag, text, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
