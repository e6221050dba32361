"""The report's second process: it reads a share of the rank records while the report reads
the rest, then draws the plots while the report writes its tables.

`Helper(plots)` forks one worker process (a concurrent.futures executor, `pool`) before the
records are read; when there are plots to draw, it first imports matplotlib (half a
second), then takes its share of the records (analysis.load(..., pool=helper.pool):
analysis/read_ahead.py). `draw(results, comm)` hands it what the plots need
(analysis/plot_data.py: small) in two parts and returns at once: first the points, from
which it draws the throughput, scaling, AMP and bus-bandwidth plots, then, once computed
here, each model's per-rank step-time summary for the step-time plots. The report prints
its tables and writes CSV and Parquet meanwhile, and `result()` collects the PNGs. The
report's own process never imports matplotlib.

Where no second process can be had (no fork, a worker that died), the records are read and
the plots drawn here, in this process: the same results, only later.
"""
import concurrent.futures
import multiprocessing

from analysis import plot_data


def _warm() -> None:
    from analysis import plot  # noqa: F401  matplotlib's import, done while records are read


def _draw(data, only):
    from analysis import plot
    return plot.render(data, only)


class Helper:
    def __init__(self, plots: bool = True):
        self.pool, self._parts = None, []
        if "fork" not in multiprocessing.get_all_start_methods():
            return     # a fresh interpreter would import everything again: work here instead
        try:
            self.pool = concurrent.futures.ProcessPoolExecutor(
                1, mp_context=multiprocessing.get_context("fork"))
            if plots:
                self.pool.submit(_warm)
        except OSError:
            self.pool = None

    def _submit(self, data, only) -> None:
        future = None
        if self.pool is not None:
            try:
                future = self.pool.submit(_draw, data, only)
            except RuntimeError:   # the pool broke (its worker died while warming)
                future = None
        self._parts.append((future, data, only))

    def draw(self, results, comm=None) -> None:
        points = plot_data.of(results, comm, spreads=False)
        self._submit(points, plot_data.FROM_POINTS)       # drawn while the rest is computed
        spreads = plot_data.rank_spreads(results, points.points)
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
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None
