"""The host-bound rule (analysis/figures/host_bound.py, docs/anatomy.md) against timings given
by hand, and through a sweep's records to the points table."""
import json
import os

import pytest

import analysis
from analysis.figures import host_bound
from contract import paths
from tests.sweepfiles import write_point, write_repeat

MS = 1e-3
N = 10   # timed steps


def busy():
    """The host enqueues a step in 10 ms, the device runs one in 30 ms: the host runs ahead.
    h_i = 10 (i+1) ms, d_i = 30 (i+1) + 1 ms; the device's step 30 ms; over the second half
    (i = 5..9) (d_i - h_i) / 30 ms = 121, 141, 161, 181, 201 over 30: median 161/30 steps."""
    return [10 * (i + 1) * MS for i in range(N)], [(30 * (i + 1) + 1) * MS for i in range(N)]


def starved():
    """The host takes 30 ms to enqueue a step; the device ends each 2 ms after it was
    enqueued (it waited on the host): h_i = 30 (i+1) ms, d_i = h_i + 2 ms: 2/30 steps."""
    return [30 * (i + 1) * MS for i in range(N)], [(30 * (i + 1) + 2) * MS for i in range(N)]


def test_a_busy_device_trails_the_host_by_many_steps():
    assert host_bound.rank_lag(*busy()) == pytest.approx(161 / 30)
    assert host_bound.verdict("NVIDIA H200", 161 / 30, False) == "device-bound"


def test_a_starved_device_ends_each_step_just_after_the_host_enqueued_it():
    assert host_bound.rank_lag(*starved()) == pytest.approx(2 / 30)
    assert host_bound.verdict("NVIDIA H200", 2 / 30, False) == "host-bound"
    assert host_bound.verdict("NVIDIA H200", 2 / 30, None) == "host-bound"   # never asked


def test_between_half_a_step_and_a_step_behind_is_balanced():
    h = [30 * (i + 1) * MS for i in range(N)]
    d = [(30 * (i + 1) + 20) * MS for i in range(N)]   # 20/30 of a step behind
    assert host_bound.rank_lag(h, d) == pytest.approx(20 / 30)
    assert host_bound.verdict("NVIDIA H200", 20 / 30, False) == "balanced"
    assert host_bound.verdict("NVIDIA H200", 1.0, False) == "device-bound"   # the edges
    assert host_bound.verdict("NVIDIA H200", 0.5, False) == "balanced"


def test_steps_that_wait_on_the_device_are_not_judged_by_lag():
    # a step that syncs holds the host to the device's pace: its timings look starved
    assert host_bound.verdict("NVIDIA H200", host_bound.rank_lag(*starved()), True) == "synced each step"
    assert host_bound.combined_syncs([False, True, None]) is True
    assert host_bound.combined_syncs([False, False]) is False
    assert host_bound.combined_syncs([False, None]) is None and host_bound.combined_syncs([]) is None


def test_a_cpu_has_no_verdict_and_too_few_steps_no_lag():
    assert host_bound.verdict("cpu", 5.0, False) == "cpu"
    assert host_bound.verdict("CPU", None, None) == "cpu"
    assert host_bound.rank_lag([0.01, 0.02], [0.03, 0.06]) is None          # two steps
    assert host_bound.rank_lag([0.01, float("nan"), 0.03], [0.03, 0.06, 0.09]) is None
    assert host_bound.rank_lag([0.01, 0.02, 0.03], [0.03, 0.03, 0.03]) is None   # no device step
    assert host_bound.verdict("NVIDIA H200", None, False) == "not recorded"


def _gpu_repeat(point, repeat, h, d, syncs, device="NVIDIA H200"):
    """A GPU rank's record by hand: its timed steps end at d (device) and were enqueued at h."""
    times = [d[0]] + [b - a for a, b in zip(d, d[1:])]
    rdir = write_repeat(point, repeat, None, step_times=[times], device=device,
                        fields=lambda r: {"step_sync": {"syncs": syncs, "sleep_s": 0.1, "host_s": 0.03}})
    path = os.path.join(rdir, paths.rank_record_name(0))
    rec = json.load(open(path))
    timed = [s for s in rec["steps"] if s["phase"] == "measure"]
    for s, enq in zip(timed, h):
        s["enqueued"] = rec["window"]["start"] + enq   # the window starts at 1.0 s
    json.dump(rec, open(path, "w"))


def test_the_points_table_says_each_gpu_points_verdict(tmp_path):
    sweep = str(tmp_path)
    cases = {"000-busy": (busy(), False), "001-starved": (starved(), False),
             "002-synced": (starved(), True)}
    for name, ((h, d), syncs) in cases.items():
        point = write_point(sweep, name, repeats=2)
        for repeat in (0, 1):
            _gpu_repeat(point, repeat, h, d, syncs)
    write_repeat(write_point(sweep, "003-cpu", repeats=1), 0, [1.0])
    points = analysis.load(sweep).points.set_index("point")
    assert points.loc["000-busy", "host_lag"] == pytest.approx(161 / 30)
    assert points.loc["001-starved", "host_lag"] == pytest.approx(2 / 30)
    assert points.host_bound.to_dict() == {"000-busy": "device-bound", "001-starved": "host-bound",
                                           "002-synced": "synced each step", "003-cpu": "cpu"}
    runs = analysis.load(sweep).runs
    assert runs[runs.point == "002-synced"].step_syncs.tolist() == [True, True]


def test_a_cpu_only_sweep_has_no_such_columns(tmp_path):
    write_repeat(write_point(str(tmp_path), "000-cpu", repeats=1), 0, [1.0])
    results = analysis.load(str(tmp_path))
    assert "host_bound" not in results.points and "host_lag" not in results.runs
