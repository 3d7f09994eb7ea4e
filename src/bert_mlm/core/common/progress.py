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


def clock(seconds: float) -> str:
    """h:mm:ss (m:ss under an hour); ``?`` for an unknown time."""
    if not math.isfinite(seconds):
        return "?"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class Progress:
    """``update(n, **fields)`` as work *completes* (never as it is handed out: the share and the
    ETA are those of finished work); ``close()`` at the end.

    ``unit="B"`` shows megabytes, ``unit="chars"`` millions of characters; any other unit counts
    items. The rate is per second since the start, or of the ``seconds`` given to ``update``
    (fine-tuning: an ETA from finished epochs, not from the set-up before the first).
    ``speed=False`` leaves the rate out (training shows its own); ``enabled=False`` shows nothing.
    """

    def __init__(self, total: float | None, description: str, unit: str = "step", enabled: bool = True,
                 initial: float = 0, every_seconds: float = 30.0, terminal: bool | None = None, speed: bool = True):
        self.total, self.description, self.unit, self.enabled, self.speed = total, description, unit, enabled, speed
        self.every_seconds, self.busy_seconds, self.fields = every_seconds, 0.0, {}
        self.done = self.start_count = self._logged = initial
        self.started = self.last_line = time.monotonic()
        self._next_tenth = self._tenth_after(initial)
        terminal = sys.stderr.isatty() if terminal is None else terminal
        self.bar = tqdm(total=total, initial=initial, desc=description, unit=unit, unit_scale=unit in ("B", "chars"),
                        dynamic_ncols=True, mininterval=1) if enabled and terminal else None

    def _tenth_after(self, count: float) -> float:
        return (math.floor(10 * count / self.total) + 1) * self.total / 10 if self.total else math.inf

    def update(self, n: float = 1, seconds: float | None = None, **fields) -> None:
        if not self.enabled:
            return
        self.done += n
        if seconds is not None:
            self.busy_seconds += seconds
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
        working = self.busy_seconds or elapsed
        rate = (self.done - self.start_count) / working if working > 0 else 0.0
        remaining = max(0.0, self.total - self.done) / rate if self.total and rate > 0 else math.nan
        if self.unit in ("B", "chars"):
            name, total = "MB" if self.unit == "B" else "M chars", f"/{self.total / 1e6:,.1f}" if self.total else ""
            position, speed = f"{self.done / 1e6:,.1f}{total} {name}", f"{rate / 1e6:.2f} {name}/s"
        else:
            total = f"/{int(self.total)}" if self.total else ""
            position, speed = f"{self.unit} {int(self.done)}{total}", f"{rate:.2f} {self.unit}/s"
        share = f" ({min(self.done / self.total, 1.0):.0%})" if self.total else ""
        fields = "".join(f", {k} {v}" for k, v in self.fields.items())
        timing = f"elapsed {clock(elapsed)}, ETA {clock(remaining)}"
        return f"{self.description}: {position}{share}{fields}{f', {speed}' if self.speed else ''}, {timing}"

    def close(self) -> None:
        """Ends the bar; in a log, writes the final state unless the last line already did."""
        if self.bar is not None:
            self.bar.close()
        elif self.enabled and self.done > self._logged:
            self._logged = self.done
            logger.info("%s", self.line())
