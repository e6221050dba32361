"""The report's plots drawn in a second process, beside the tables.

`Plotter()` starts one worker process before the records are read; it imports matplotlib
(half a second) and draws a first figure (fonts, the PNG encoder) while the records are
parsed. `draw(results, comm)` hands it what the plots need (analysis/plot_data.py: small)
in two parts and returns at once: first the points, from which it draws the throughput,
scaling, AMP and bus-bandwidth plots, then each model's step-time spread per rank (of one
point), for the step-time plots. The report prints its tables and writes CSV and Parquet
meanwhile, and `result()` collects the PNGs. The report's own process never imports
matplotlib.

Where no second process can be had (no fork, a worker that died), the plots are drawn here,
in this process: the same figures, only later.
"""
import concurrent.futures
import multiprocessing
import multiprocessing.connection
import os
import threading

from analysis import plot_data


def _end_with_the_report() -> None:
    """In the worker: end when the report's process ends, however it ends. Killed (SIGKILL,
    out of memory), the report never tells it to stop, and it would wait for work forever."""
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=lambda: (multiprocessing.connection.wait([parent.sentinel]),
                                         os._exit(1)), daemon=True).start()


def _warm() -> None:
    # matplotlib's import and a first figure, done while the records are read
    from analysis import plot, plot_style  # noqa: F401  (plot: its imports)
    plot_style.warm()


def _draw(data, only):
    from analysis import plot
    return plot.render(data, only)


def second_process(warm):
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


class Plotter:
    def __init__(self):
        self._pool, self._parts = second_process(_warm), []

    def _submit(self, data, only) -> None:
        future = None
        if self._pool is not None:
            try:
                future = self._pool.submit(_draw, data, only)
            except RuntimeError:   # the pool broke (its worker died while warming)
                future = None
        self._parts.append((future, data, only))

    def draw(self, results, comm=None) -> None:
        points = plot_data.of(results, comm, spreads=False)
        self._submit(points, plot_data.FROM_POINTS)       # drawn while the rest is computed
        # the step-time spread is a row per rank, computed here: handing a million timed steps
        # to the worker took longer than summing them up (benchmarks/analysis_scale.md)
        self._submit(points._replace(spreads=plot_data.rank_spreads(results, points.points)),
                     plot_data.FROM_STEPS)

    def result(self):
        """(plots, skipped) as analysis.plot.render gives them."""
        plots, skipped = [], []
        try:
            for future, data, only in self._parts:
                try:
                    p, s = future.result() if future is not None else _draw(data, only)
                except concurrent.futures.process.BrokenProcessPool:
                    p, s = _draw(data, only)   # the worker died (killed, out of memory): here
                plots += p
                skipped += s
            return plots, skipped
        finally:
            self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
