"""A folder of sweeps, as `python -m analysis report ROOT` reads it: the sweeps repeat point
names (each has its 000-pytorch-resnet50-...), and a point's figures are its own sweep's
runs, never a same-named point's of another sweep."""
import os

import pytest

import analysis
from analysis.figures import metrics
from tests.store_scenario import DAY, T0, run, sweep
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
    results = analysis.load(tmp_path, merge=True)
    by_sweep = {os.path.basename(str(s)): row for s, row in
                zip(results.points.sweep, results.points.itertuples())}
    assert by_sweep["a"].throughput == pytest.approx(80) and by_sweep["b"].throughput == pytest.approx(40)
    m = {os.path.basename(str(r.sweep)): r for r in metrics.metrics(results).itertuples()}
    # latency: the window over its 10 timed steps, each sweep its own: 100 ms and 200 ms
    assert m["a"].latency_ms == pytest.approx(100) and m["b"].latency_ms == pytest.approx(200)
    assert len(results.runs_of(by_sweep["b"].sweep, NAME)) == 3
    assert set(results.runs_of(by_sweep["a"].sweep, NAME).status) == {"ok"}


def test_a_report_of_a_folder_of_sweeps_is_refused_unless_merged(tmp_path, capsys):
    """Issue 52: `analysis report /tmp` made one report of 10 unrelated sweeps, wrote
    /tmp/report/ and stored them. Refused (one line naming them, exit 2, nothing written or
    stored) unless --merge; a merge's sweeps are stored each as its own."""
    a, b = sweep(tmp_path, "a", T0, [1.0]), sweep(tmp_path, "b", T0 + DAY, [0.5])
    db = str(tmp_path / "store.sqlite")
    code, out, err = run(capsys, "report", tmp_path, "--no-plot", "--store", db)
    assert code == 2 and out == ""
    assert err == (f"error: {tmp_path} holds 2 sweeps (a, b): name one, or ask for their merge "
                   "(--merge)\n")
    assert not os.path.exists(tmp_path / "report")
    assert not os.path.exists(db)    # the store never opened: nothing added
    code, out, err = run(capsys, "report", tmp_path, "--no-plot", "--merge", "--store", db)
    assert code == 0, err
    assert os.path.isfile(tmp_path / "report" / "points.csv")
    assert "added a@" in out and "added b@" in out
    code, out, err = run(capsys, "report", a, "--no-plot", "--store", db)   # one sweep: as ever
    assert code == 0 and "unchanged" in out, out + err


def test_a_notebook_load_of_a_folder_of_sweeps_names_them(tmp_path):
    for k in range(7):
        sweep(tmp_path, f"s{k}", T0, [1.0])
    with pytest.raises(analysis.SeveralSweeps) as exc:
        analysis.load(tmp_path)
    assert str(exc.value) == (f"{tmp_path} holds 7 sweeps (s0, s1, s2, s3, s4 and 2 more): name "
                              "one, or ask for their merge (merge=True)")
    assert len(analysis.load(tmp_path, merge=True).points) == 7
