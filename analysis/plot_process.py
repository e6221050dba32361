"""The report's plots drawn in a second process, beside the tables.

`Plotter()` starts one worker process before the records are read; it imports matplotlib
(half a second) while the records are parsed. `draw(results, comm)` hands it what the plots
need (analysis/plot_data.py: small) in two parts and returns at once: first the points,
from which it draws the throughput, scaling, AMP and bus-bandwidth plots, then each model's
timed steps of one point, whose per-rank summary it computes for the step-time plots. The
report prints its tables and writes CSV and Parquet meanwhile, and `result()` collects
the PNGs. The report's own process never imports matplotlib.

Where no second process can be had (no fork, a worker that died), the plots are drawn here,
in this process: the same figures, only later.
"""
import concurrent.futures
import multiprocessing

from analysis import plot_data


def _warm() -> None:
    from analysis import plot  # noqa: F401  matplotlib's import, done while records are read


def _draw(data, only):
    from analysis import plot
    return plot.render(plot_data.with_stats(data), only)


class Plotter:
    def __init__(self):
        self._pool, self._parts = None, []
        if "fork" not in multiprocessing.get_all_start_methods():
            return     # a fresh interpreter would import everything again: draw here instead
        try:
            self._pool = concurrent.futures.ProcessPoolExecutor(
                1, mp_context=multiprocessing.get_context("fork"))
            self._pool.submit(_warm)
        except OSError:
            self._pool = None

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
        spreads = plot_data.rank_spreads(results, points.points, raw=True)  # stats: the worker's
        self._submit(points._replace(spreads=spreads), plot_data.FROM_STEPS)

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
