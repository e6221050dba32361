"""The report's plots drawn in a second process, beside the tables.

`Plotter()` starts one worker process before the records are read; it imports matplotlib
(half a second) and draws a first plot (fonts, the PNG encoder) while the records are
parsed. `draw(results, comm)` hands it what the plots need (analysis/plots/data.py: small)
in two parts and returns at once: first the points, from which it draws the throughput,
scaling, AMP and bus-bandwidth plots, then each model's step-time spread per rank (of one
point), for the step-time plots. The report prints its tables and writes CSV and Parquet
meanwhile, and `result()` collects the PNGs. The report's own process never imports
matplotlib.

Where no second process can be had (no fork, a worker that died), the plots are drawn here,
in this process: the same plots, only later.
"""
from analysis.plots import data as plot_data
from analysis.second_process import SecondProcess


def _warm() -> None:
    # matplotlib's import and a first plot, done while the records are read
    from analysis.plots import draw, style  # noqa: F401  (draw: its imports)
    style.warm()


def _draw(data, only):
    from analysis.plots import draw
    return draw.render(data, only)


class Plotter:
    def __init__(self):
        self._worker, self._jobs = SecondProcess(_warm), []

    def draw(self, results, comm=None) -> None:
        points = plot_data.of(results, comm, spreads=False)
        # drawn while the rest is computed
        self._jobs.append(self._worker.submit(_draw, points, plot_data.FROM_POINTS))
        # the step-time spread is a row per rank, computed here: handing a million timed steps
        # to the worker took longer than summing them up (benchmarks/analysis_scale.md)
        spreads = points._replace(spreads=plot_data.rank_spreads(results, points.points))
        self._jobs.append(self._worker.submit(_draw, spreads, plot_data.FROM_STEPS))

    def result(self):
        """(plots, skipped) as analysis/plots/draw.py's render gives them."""
        plots, skipped = [], []
        try:
            for job in self._jobs:
                p, s = job.result()
                plots += p
                skipped += s
            return plots, skipped
        finally:
            self.close()

    def close(self) -> None:
        self._worker.close()
