"""A folder of sweeps, as `python -m analysis report ROOT` reads it: the sweeps repeat point
names (each has its 000-pytorch-resnet50-...), and a point's figures are its own sweep's
runs, never a same-named point's of another sweep."""
import os

import pytest

import analysis
from analysis.figures import metrics
from tests.sweepfiles import write_point, write_repeat

NAME = "000-pytorch-resnet50-fp32-1x1-bs8"


def test_same_named_points_of_two_sweeps_keep_their_own_runs(tmp_path):
    # the same point in two sweeps: 10 timed steps of 8 samples in 1 s in one, in 2 s in
    # the other, and the second's last repeat failed
    for sweep, window, statuses in (("a", 1.0, ["ok"] * 3), ("b", 2.0, ["ok", "ok", "crash"])):
        pt = write_point(os.path.join(tmp_path, sweep), NAME)
        for r, status in enumerate(statuses):
            write_repeat(pt, r, [window], status=status,
                         error=None if status == "ok" else "rank 0 died")
    results = analysis.load(tmp_path)
    by_sweep = {os.path.basename(str(s)): row for s, row in
                zip(results.points.sweep, results.points.itertuples())}
    assert by_sweep["a"].throughput == pytest.approx(80) and by_sweep["b"].throughput == pytest.approx(40)
    m = {os.path.basename(str(r.sweep)): r for r in metrics.metrics(results).itertuples()}
    # latency: the window over its 10 timed steps, each sweep its own: 100 ms and 200 ms
    assert m["a"].latency_ms == pytest.approx(100) and m["b"].latency_ms == pytest.approx(200)
    assert len(results.runs_of(by_sweep["b"].sweep, NAME)) == 3
    assert set(results.runs_of(by_sweep["a"].sweep, NAME).status) == {"ok"}
