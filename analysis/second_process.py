"""One forked worker process beside the report, for work that need not hold it up: the plots
(analysis/plots/process.py: matplotlib's import and the drawing) and the results store
(analysis/store/keeper.py: SQLAlchemy's import and the add). `SecondProcess(warm)` forks it at
once, running `warm` (the imports) while the records are read; `submit(fn, *args)` hands it
work and `Job.result()` waits for it. Where no fork can be had, or the worker died, the work is
done in the report's own process: the same result, only later. Neutral on purpose: both import
it, and it imports nothing of the analysis.
"""
import concurrent.futures
import multiprocessing
import multiprocessing.connection
import os
import threading
from typing import Any, Callable, NamedTuple


def _end_with_the_report() -> None:
    """In the worker: end when the report's process ends, however it ends. Killed (SIGKILL,
    out of memory), the report never tells it to stop, and it would wait for work forever."""
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=lambda: (multiprocessing.connection.wait([parent.sentinel]),
                                         os._exit(1)), daemon=True).start()


def _forked(warm):
    """One forked worker that ends with the report, already running `warm` (its imports);
    None where no fork can be had (a fresh interpreter would import everything again)."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return None
    try:
        pool = concurrent.futures.ProcessPoolExecutor(
            1, mp_context=multiprocessing.get_context("fork"), initializer=_end_with_the_report)
        pool.submit(warm)
        return pool
    except OSError:
        return None


class Job(NamedTuple):
    """Work handed to the second process; `result()` waits for it. Where it was never handed
    over (no second process) or its worker died (killed, out of memory), `result()` does the
    work here: the same result, only later."""
    future: "concurrent.futures.Future[Any] | None"
    fn: Callable
    args: tuple

    def result(self) -> Any:   # fn's result: whatever fn returns
        if self.future is not None:
            try:
                return self.future.result()
            except concurrent.futures.process.BrokenProcessPool:
                pass   # the worker died: here, then
        return self.fn(*self.args)


class SecondProcess:
    """One forked worker beside the report, started at once and running `warm` (its imports)
    while the records are read; none where `fork` is false (the work is then done here)."""

    def __init__(self, warm, fork: bool = True):
        self._pool = _forked(warm) if fork else None

    def submit(self, fn, *args) -> Job:
        future = None
        if self._pool is not None:
            try:
                future = self._pool.submit(fn, *args)
            except RuntimeError:   # the pool broke (its worker died while warming)
                future = None
        return Job(future, fn, args)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
