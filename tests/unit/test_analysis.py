"""Records on disk -> points, runs, report: figures checked by hand."""
import os
import subprocess
import sys

import pandas as pd
import pytest

import analysis
from analysis.report import contents as report
from analysis.sections import main_tables
from tests.sweepfiles import write_point, write_repeat

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def sweep(tmp_path):
    s = str(tmp_path / "sweep")
    one = write_point(s, "000-pytorch-resnet50-fp32-1x1-bs8")
    # 10 steps x 8 samples = 80 samples; windows 1.0, 0.8, 1.25 s -> 80, 100, 64 /s; median 80
    for r, w in enumerate([1.0, 0.8, 1.25]):
        write_repeat(one, r, [w])
    two = write_point(s, "001-pytorch-resnet50-fp32-1x2-bs8", gpus_per_node=2)
    # 2 ranks x 80 samples = 160; longest windows 1.0, 1.25, 1.0 -> 160, 128, 160; median 160
    for r, ws in enumerate([[0.9, 1.0], [1.25, 1.1], [1.0, 1.0]]):
        write_repeat(two, r, ws)
    four = write_point(s, "002-pytorch-resnet50-fp32-2x2-bs8", nodes=2, gpus_per_node=2)
    write_repeat(four, 0, [1.0, 1.0, 1.0, 1.0])           # 320/s
    write_repeat(four, 1, [1.0, 1.0, 1.0, 1.0], status="oom", error="OutOfMemoryError: x")
    write_point(s, "003-pytorch-resnet50-fp32-1x4-bs8", gpus_per_node=4)   # never ran
    return s


def test_points_by_hand(sweep):
    p = analysis.load(sweep).points.set_index("point")
    one, two, four = (p.loc[f"00{i}-pytorch-resnet50-fp32-{l}-bs8"] for i, l in
                      ((0, "1x1"), (1, "1x2"), (2, "2x2")))
    assert one.throughput == pytest.approx(80.0)
    assert (one.tp_min, one.tp_max) == (pytest.approx(64.0), pytest.approx(100.0))
    assert two.throughput == pytest.approx(160.0)
    assert two.speedup == pytest.approx(2.0) and two.efficiency == pytest.approx(1.0)
    assert four.status == "partial" and four.n_ok == 1 and four.throughput == pytest.approx(320.0)
    assert four.speedup == pytest.approx(4.0) and four.efficiency == pytest.approx(1.0)
    assert four.error == "rank 0: OutOfMemoryError: x"
    assert p.loc["003-pytorch-resnet50-fp32-1x4-bs8"].status == "missing"


def test_runs_and_steps(sweep):
    res = analysis.load(sweep)
    assert len(res.runs) == 8
    oom = res.runs[res.runs.status == "oom"]
    assert len(oom) == 1 and oom.throughput.isna().all()
    assert set(res.steps.phase) == {"warmup", "measure"}
    assert len(res.steps[(res.steps.phase == "measure")]) == 10 * (3 + 2 * 3 + 4 * 2)


def test_report_marks_failed_and_missing_points(sweep):
    text = report.render(analysis.load(sweep))
    assert "320.0*" in text            # partial point: value with a mark
    assert "missing" in text and "OutOfMemoryError" in text
    header = next(line for line in text.splitlines() if line.startswith("| framework"))
    assert [c.strip() for c in header.split("|")[5:-1]] == ["1x1", "1x2", "1x4", "2x2"]


def test_interrupted_attempt_is_not_counted(sweep):
    # An attempt cut short by a requeue is kept aside under another name and never read.
    pdir = os.path.join(sweep, "points", "000-pytorch-resnet50-fp32-1x1-bs8")
    os.rename(os.path.join(pdir, "repeat-02"), os.path.join(pdir, "repeat-02.interrupted-1"))
    p = analysis.load(sweep).points.set_index("point").loc["000-pytorch-resnet50-fp32-1x1-bs8"]
    assert p.n_recorded == 2 and p.status == "partial" and p.throughput == pytest.approx(90.0)


def test_repeat_without_run_json_is_incomplete(tmp_path):
    pt = write_point(str(tmp_path), "000-x")
    write_repeat(pt, 0, [1.0], run_json=False)
    os.remove(os.path.join(pt["dir"], "repeat-00", "rank-00000.json"))
    p = analysis.load(str(tmp_path)).points.iloc[0]
    assert p.status == "incomplete" and p.n_ok == 0


def test_amp_ratio(tmp_path):
    s = str(tmp_path)
    write_repeat(write_point(s, "000-fp32"), 0, [1.0])                          # 80/s
    write_repeat(write_point(s, "001-amp", precision="amp", repeats=1), 0, [0.5])  # 160/s
    assert "2.00" in main_tables.amp_ratio(analysis.load(s).points)


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "analysis", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_cli_writes_tables_csv_and_plot(sweep, tmp_path):
    out = run_cli("report", sweep, "--out", str(tmp_path / "rep"))
    assert out.returncode == 0, out.stderr
    assert "Speedup over 1 device" in out.stdout
    for f in ("points.csv", "runs.csv", "steps.parquet", "scaling_resnet50.png",
              "throughput_resnet50.png", "rank_steps_resnet50.png"):
        assert (tmp_path / "rep" / f).stat().st_size > 0
    steps = pd.read_parquet(tmp_path / "rep" / "steps.parquet")
    assert len(steps) == 11 * (3 + 2 * 3 + 4 * 2) and set(steps.phase) == {"warmup", "measure"}


def test_runs_csv_tells_same_named_points_of_two_sweeps_apart(tmp_path):
    for name, window in (("a", 1.0), ("b", 0.5)):
        write_repeat(write_point(str(tmp_path / name), "000-x", repeats=1), 0, [window])
    out = run_cli("report", str(tmp_path), "--no-plot", "--merge", "--out", str(tmp_path / "rep"))
    assert out.returncode == 0, out.stderr
    runs = pd.read_csv(tmp_path / "rep" / "runs.csv")
    assert list(runs.columns[:3]) == ["sweep", "point", "repeat"]
    by_sweep = runs.set_index(runs.sweep.map(os.path.basename)).throughput
    assert by_sweep["a"] == pytest.approx(80.0) and by_sweep["b"] == pytest.approx(160.0)


def test_corrupt_record_costs_only_its_repeat(sweep):
    # A torn rank record: its repeat is corrupt, the rest of the sweep is reported; exit 1.
    bad = os.path.join(sweep, "points", "000-pytorch-resnet50-fp32-1x1-bs8", "repeat-01",
                       "rank-00000.json")
    with open(bad, "w") as f:
        f.write('{"schema": "dlbench.rank", "vers')
    out = run_cli("report", sweep, "--no-plot")
    assert out.returncode == 1
    assert "corrupt record file" in out.stdout and bad in out.stdout
    assert "Speedup over 1 device" in out.stdout and "Traceback" not in out.stderr
    assert out.stderr.strip().count("\n") == 0


@pytest.mark.parametrize("path", ["/nonexistent/sweep", "/proc/self/fdinfo"])
def test_unreadable_path_is_one_line_error(path):
    out = run_cli("report", path)
    assert out.returncode == 2 and out.stderr.startswith("error: ")
    assert "Traceback" not in out.stderr


def test_newer_schema_costs_only_its_repeat(tmp_path):
    pt = write_point(str(tmp_path), "000-x")
    rdir = write_repeat(pt, 0, [1.0])
    write_repeat(pt, 1, [0.5])
    path = os.path.join(rdir, "run.json")
    text = open(path).read().replace('"version": 1', '"version": 99')
    open(path, "w").write(text)
    res = analysis.load(str(tmp_path))
    run = res.runs.set_index("repeat").loc[0]
    assert run.status == "corrupt" and "newer" in run.error and path in run.error
    assert res.points.iloc[0].status == "partial"
    assert res.points.iloc[0].throughput == pytest.approx(160.0)   # repeat 1: 80 samples / 0.5 s
