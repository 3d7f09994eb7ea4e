"""Where the data stages run their parallel work: this machine's cores, or a Dask cluster.

Both engines expose one operation, :meth:`map_ordered`: apply a pure function to a stream of
work items with a bounded number in flight, and yield the results in input order. The output
therefore does not depend on the engine, the number of workers or their timing (the Dask
engine writes the same store, byte for byte, as the local one), and memory is bounded by the
items in flight, never by the corpus.

- ``local``: a process pool over this machine's cores for Python-bound work (cleaning);
  work that parallelises itself (``tokenizers`` encodes on all cores in Rust) runs in-process.
- ``dask``: ``dask.distributed`` tasks, on a ``LocalCluster`` or on a running scheduler
  (``data.scheduler_address``). The workers read the corpus's pieces themselves from its remote
  store (S3, HTTP, ...; on a LocalCluster local files too: ``sources.read_tasks``); results come
  back to this process, which writes the files, so workers need no shared filesystem.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from bert_mlm.config import DataConfig
from bert_mlm.errors import UserError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Finished:
    """Counts work into ``progress`` when it is finished, not when it is handed out: ``size(item)``
    is measured as an item is submitted and added when its result comes back (a pool holds
    ``workers x in_flight_per_worker`` items, so counting at hand-out ran ~90 % ahead of the work)."""

    progress: Any  # a core.common.progress.Progress
    size: Callable[[Any], float] = len


def _ordered(submit: Callable[..., Any], result: Callable[[Any], Any], function: Callable, items: Iterable,
             args: tuple, limit: int, finished: Finished | None = None) -> Iterator[Any]:
    pending: deque = deque()

    def take() -> Any:
        future, size = pending.popleft()
        value = result(future)
        if finished is not None:
            finished.progress.update(size)
        return value

    for item in items:
        pending.append((submit(function, item, *args), finished.size(item) if finished is not None else 0))
        if len(pending) >= limit:
            yield take()
    while pending:
        yield take()


PARENT_POLL_SECONDS = 0.5


def exit_with_parent(parent: int) -> None:
    """Pool worker initializer: the worker ends itself when the process that started the pool is
    gone (after a kill -9, idle workers would wait on their queue for ever, ~0.6 GB each). A
    watchdog thread, not ``prctl(PR_SET_PDEATHSIG)``, which fires when the forking *thread* ends (the
    pool forks from whichever thread submits first), is Linux-only, and under ``forkserver`` sees the
    fork server as parent; the watchdog polls both pids every ``PARENT_POLL_SECONDS``."""
    own_parent = os.getppid()

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, PermissionError):  # PermissionError: someone else's process holds the number
            return False
        return True

    def watch() -> None:
        while os.getppid() == own_parent and alive(parent):
            time.sleep(PARENT_POLL_SECONDS)
        os._exit(1)  # no clean-up to do: results go to the parent, which is gone

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


# Characters per work item of the jobs that run on worker processes (encoding with word segmentation): a
# row group (data.chunk_bytes, 2 MB) could give one worker a small corpus's whole train split. Each
# worker's working set grows with its item (rjieba's word strings, per-character arrays): measured
# on ChnSentiCorp + msra news, `--env zh` data stages, 2 local workers, 3 runs each alternating: 256 k
# characters gave a whole-tree peak PSS of 841-858 MiB and encoding in 2.0-2.6 s, 1 M characters
# 1,058-1,099 MiB and 2.8-3.0 s (the smaller items also spread a small corpus over both workers).
# On Dask, the process that holds the client and the scheduler grew with the number of items (16x
# corpus: 1.21 GB with 256 k-character items, 0.86 GB with 1 M), so Dask keeps the larger items
# (the engine's ``piece_chars``).
PIECE_CHARS = 1 << 18


class LocalEngine:
    piece_chars = PIECE_CHARS  # characters per work item (PIECE_CHARS says why)

    def __init__(self, config: DataConfig):
        self.config = config
        self._pool: Executor | None = None

    def map_ordered(self, function: Callable, items: Iterable, *args: Any, python_bound: bool = True,
                    finished: Finished | None = None) -> Iterator[Any]:
        """``function(item, *args)`` for each item, in order. ``python_bound=False``: the function
        uses every core itself (Rust threads), so it runs in this process. ``finished``: where
        each item's size is counted once its result is back."""
        workers = self.config.worker_count
        if not python_bound or workers == 1:
            return _ordered(lambda fn, item, *rest: (fn, item, rest), lambda call: call[0](call[1], *call[2]),
                            function, items, args, 1, finished)
        if self._pool is None:
            self._pool = ProcessPoolExecutor(workers, initializer=exit_with_parent, initargs=(os.getpid(),))
        limit = workers * self.config.in_flight_per_worker
        return _ordered(self._pool.submit, lambda f: f.result(), function, items, args, limit, finished)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


class DaskEngine:
    piece_chars = 4 * PIECE_CHARS  # fewer, larger tasks: the client's process grows with their number

    def __init__(self, config: DataConfig):
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError as error:
            raise UserError('data.engine: dask needs dask[distributed]; install it with pip install "dask[distributed]"'
                            ) from error
        self.config = config
        self._cluster = None
        # distributed logs ~80 INFO lines per cluster (every worker's start, address and stop); this
        # project's log keeps its warnings. A level the user set (e.g. DEBUG in their logging file) stays.
        for name in ("distributed", "distributed.scheduler", "distributed.nanny", "distributed.worker",
                     "distributed.core", "distributed.http.proxy"):
            if logging.getLogger(name).level in (logging.NOTSET, logging.INFO):
                logging.getLogger(name).setLevel(logging.WARNING)
        if config.scheduler_address:
            try:
                self.client = Client(config.scheduler_address, timeout="30s")
            except OSError as error:
                raise UserError(f"data.scheduler_address: no Dask scheduler answered at {config.scheduler_address!r} "
                                f"({error})") from error
        else:
            self._cluster = LocalCluster(n_workers=config.worker_count, threads_per_worker=1, processes=True,
                                         dashboard_address=None, silence_logs=logging.WARNING)
            try:
                self.client = Client(self._cluster)
            except BaseException:
                self._cluster.close()
                raise
        logger.info("Dask engine: %s", self.client)

    @property
    def workers(self) -> int:
        return max(1, len(self.client.scheduler_info().get("workers", {})))

    def map_ordered(self, function: Callable, items: Iterable, *args: Any, python_bound: bool = True,
                    finished: Finished | None = None) -> Iterator[Any]:
        # Large shared arguments (a tokenizer) are sent to every worker once, not with each task.
        shared = tuple(self.client.scatter(a, broadcast=True, hash=False)
                       if isinstance(a, (str, bytes)) and len(a) > 100_000 else a for a in args)
        limit = self.workers * self.config.in_flight_per_worker
        return _ordered(lambda fn, item, *rest: self.client.submit(fn, item, *rest, pure=False),
                        lambda future: future.result(), function, items, shared, limit, finished)

    def close(self) -> None:
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()


# Dask engines stay open between the data stages of a run: a LocalCluster takes seconds to start,
# and each stage used to start its own. close_engines() ends them (the project's hooks, at the end
# of a run; atexit otherwise).
_dask_engines: dict[DataConfig, DaskEngine] = {}


@contextmanager
def open_engine(config: DataConfig):
    if config.engine == "dask":
        if config not in _dask_engines:
            _dask_engines[config] = DaskEngine(config)
        yield _dask_engines[config]
        return
    engine = LocalEngine(config)
    try:
        yield engine
    finally:
        engine.close()


def close_engines() -> None:
    while _dask_engines:
        _dask_engines.popitem()[1].close()


atexit.register(close_engines)
