"""Progress of long work: a live bar in a terminal, plain log lines in a file.

Long runs go to log files (nohup, CI, SLURM, Kubernetes). A tqdm bar there is one endless line of
carriage returns; so where stderr is not a terminal, :class:`Progress` logs one INFO line at every
tenth of the work and at least every ``every_seconds``, with the same fields as the bar.
"""

from __future__ import annotations

import logging
import math
import sys
import time

from tqdm.auto import tqdm

logger = logging.getLogger("bert_mlm.progress")


def _clock(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class Progress:
    """``update(n, **fields)`` as work completes; ``close()`` at the end.

    ``unit="B"`` shows megabytes and MB/s, ``unit="chars"`` millions of characters; any other
    unit counts items (``step 120/360``).
    ``enabled=False`` shows nothing (e.g. data-parallel ranks other than 0).
    """

    def __init__(self, total: float | None, description: str, unit: str = "step", enabled: bool = True,
                 initial: float = 0, every_seconds: float = 30.0, terminal: bool | None = None):
        self.total, self.description, self.unit, self.enabled = total, description, unit, enabled
        self.done = initial
        self.every_seconds = every_seconds
        self.started = self.last_line = time.monotonic()
        self.start_count = initial
        self.fields: dict[str, str] = {}
        self._next_tenth = self._tenth_after(initial)
        self._logged = initial
        terminal = sys.stderr.isatty() if terminal is None else terminal
        self.bar = None
        if enabled and terminal:
            self.bar = tqdm(
                total=total,
                initial=initial,
                desc=description,
                unit=unit,
                unit_scale=unit in ("B", "chars"),
                dynamic_ncols=True,
                mininterval=1,
            )

    def _tenth_after(self, count: float) -> float:
        if not self.total:
            return math.inf
        return (math.floor(10 * count / self.total) + 1) * self.total / 10

    def update(self, n: float = 1, **fields) -> None:
        if not self.enabled:
            return
        self.done += n
        self.fields.update({k: str(v) for k, v in fields.items()})
        if self.bar is not None:
            self.bar.update(n)
            if fields:
                self.bar.set_postfix(self.fields, refresh=False)
            return
        now = time.monotonic()
        finished = self.total is not None and self.done >= self.total
        if self.done >= self._next_tenth or now - self.last_line >= self.every_seconds or finished:
            self._next_tenth = self._tenth_after(self.done)
            self.last_line = now
            self._logged = self.done
            logger.info("%s", self.line(now))

    def line(self, now: float | None = None) -> str:
        elapsed = (now or time.monotonic()) - self.started
        rate = (self.done - self.start_count) / elapsed if elapsed > 0 else 0.0
        remaining = max(0.0, self.total - self.done) / rate if self.total and rate > 0 else math.nan
        if self.unit in ("B", "chars"):
            name = "MB" if self.unit == "B" else "M chars"
            position = (
                f"{self.done / 1e6:,.1f}/{self.total / 1e6:,.1f} {name}"
                if self.total
                else f"{self.done / 1e6:,.1f} {name}"
            )
            speed = f"{rate / 1e6:.2f} {name}/s"
        else:
            position = (
                f"{self.unit} {int(self.done)}/{int(self.total)}" if self.total else f"{self.unit} {int(self.done)}"
            )
            speed = f"{rate:.2f} {self.unit}/s"
        share = f" ({min(self.done / self.total, 1.0):.0%})" if self.total else ""
        fields = "".join(f", {k} {v}" for k, v in self.fields.items())
        timing = f"elapsed {_clock(elapsed)}, ETA {_clock(remaining)}"
        return f"{self.description}: {position}{share}{fields}, {speed}, {timing}"

    def close(self) -> None:
        """Ends the bar; in a log, writes the final state unless the last line already did."""
        if self.bar is not None:
            self.bar.close()
        elif self.enabled and self.done > self._logged:
            self._logged = self.done
            logger.info("%s", self.line())
