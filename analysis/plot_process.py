"""The report's plots drawn in a second process, beside the tables.

`Plotter()` starts one worker process before the records are read; it imports matplotlib
(half a second) while the records are parsed. `draw(data)` hands it analysis/plot_data.py's
PlotData (the points and per-rank summaries: small) and returns at once; the report prints
its tables and writes CSV and Parquet meanwhile, and `result()` collects the PNGs. The
report's own process never imports matplotlib.

Where no second process can be had (no fork, a worker that died), the plots are drawn here,
in this process, as before: the same figures, only later.
"""
import concurrent.futures
import multiprocessing


def _warm() -> None:
    from analysis import plot  # noqa: F401  matplotlib's import, done while records are read


def _draw(data):
    from analysis import plot
    return plot.render(data)


class Plotter:
    def __init__(self):
        self._pool = self._future = None
        if "fork" not in multiprocessing.get_all_start_methods():
            return     # a fresh interpreter would import everything again: draw here instead
        try:
            self._pool = concurrent.futures.ProcessPoolExecutor(
                1, mp_context=multiprocessing.get_context("fork"))
            self._pool.submit(_warm)
        except OSError:
            self._pool = None

    def draw(self, data) -> None:
        self._data = data
        if self._pool is not None:
            try:
                self._future = self._pool.submit(_draw, data)
            except RuntimeError:   # the pool broke (its worker died while warming)
                self._future = None

    def result(self):
        """(plots, skipped) as analysis.plot.render gives them."""
        try:
            if self._future is not None:
                try:
                    return self._future.result()
                except concurrent.futures.process.BrokenProcessPool:
                    pass   # the worker died (killed, out of memory): draw here
            return _draw(self._data)
        finally:
            self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
