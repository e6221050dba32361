"""The method's intervals, flags, step-time percentiles, straggler ratio and drift on sweeps
built by hand (tests/sweepfiles.py), through analysis.load, the report and points.csv, with
every figure computed by hand."""
import os
import subprocess
import sys

import pandas as pd
import pytest

import analysis
from analysis.report import contents as report
from tests.sweepfiles import write_point, write_repeat

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ONE, TWO = "000-pytorch-resnet50-fp32-1x1-bs8", "001-pytorch-resnet50-fp32-1x2-bs8"
BERT = "002-pytorch-bert_base-fp32-1x2-bs8"
# rank 0: seven steps of 0.1 s, then 0.2, 0.2, 0.3 (1.4 s); rank 1: ten of 0.1 s (1.0 s)
SLOWING = [[0.1] * 7 + [0.2, 0.2, 0.3], [0.1] * 10]


@pytest.fixture
def sweep(tmp_path):
    s = str(tmp_path / "sweep")
    one = write_point(s, ONE, repeats=6)
    # 10 steps x 8 = 80 samples: 80, 100, 64, 80, 80, 100 /s
    for r, w in enumerate([1.0, 0.8, 1.25, 1.0, 1.0, 0.8]):
        write_repeat(one, r, [w])
    two = write_point(s, TWO, gpus_per_node=2, repeats=3)
    for r in range(3):                                   # 160 /s, every time
        write_repeat(two, r, [1.0, 1.0])
    bert = write_point(s, BERT, model="bert_base", gpus_per_node=2, repeats=3)
    for r in range(3):
        write_repeat(bert, r, None, step_times=SLOWING)
    return s


def test_interval_and_spread_flag(sweep):
    p = analysis.load(sweep).points.set_index("point")
    one = p.loc[ONE]
    # sorted 64, 80, 80, 80, 100, 100: median 80; 6 repeats: the 95% interval is min..max
    # (j = 1), covering 1 - 2/64 = 96.875%
    assert one.throughput == pytest.approx(80.0)
    assert (one.ci_lo, one.ci_hi) == (pytest.approx(64.0), pytest.approx(100.0))
    assert one.ci_coverage == pytest.approx(0.96875)
    # mean 84; squared deviations 400+16+16+16+256+256 = 960; sd sqrt(960/5) = 13.856; CV 16.5%
    assert one.tp_cv == pytest.approx(13.8564 / 84, abs=1e-5)
    assert one.marks == "C" and one.flag_spread and not one.flag_few_repeats
    # 3 repeats: no 95% interval exists; no flag of its own, but its baseline is flagged
    two = p.loc[TWO]
    assert pd.isna(two.ci_lo) and two.marks == ""
    assert two.speedup == pytest.approx(2.0) and two.flag_baseline and two.speedup_marks == "B"
    assert one.speedup_marks == "C" and not one.flag_baseline


def test_steps_straggler_and_drift(sweep):
    res = analysis.load(sweep)
    p = res.points.set_index("point").loc[BERT]
    # 2 ranks x 10 steps x 8 = 160 samples over the longest window, 1.4 s
    assert p.throughput == pytest.approx(160 / 1.4)
    # windows 1.4 and 1.0: median 1.2; 1.4 / 1.2
    assert p.straggler == pytest.approx(1.4 / 1.2)
    # halves summed over ranks: first 0.5 + 0.5 = 1.0 s, second 0.9 + 0.5 = 1.4 s: 1.0/1.4 - 1
    assert p.drift == pytest.approx(-2 / 7)
    assert p.marks == "D" and p.flag_drift
    # 3 repeats x 20 steps = 60 durations: 51 of 0.1, 6 of 0.2, 3 of 0.3, nearest rank:
    # p50 the 30th (0.1), p90 the 54th (0.2), p99 the ceil(59.4) = 60th (0.3)
    assert (p.step_p50, p.step_p90, p.step_p99) == (pytest.approx(0.1), pytest.approx(0.2),
                                                    pytest.approx(0.3))
    runs = res.runs[res.runs.point == BERT]
    assert runs.straggler.tolist() == pytest.approx([1.4 / 1.2] * 3)
    assert runs.drift.tolist() == pytest.approx([-2 / 7] * 3)


def test_the_slowest_node_is_named_past_5_percent(tmp_path):
    s = str(tmp_path)
    pt = write_point(s, "000-pytorch-resnet50-fp32-2x2-bs8", nodes=2, gpus_per_node=2, repeats=3)
    # ranks 0, 1 on node1, 2, 3 on node2; rank 3's window 1.1 s over a median of 1.0: 10%
    write_repeat(pt, 0, [1.0, 1.0, 1.0, 1.1])
    write_repeat(pt, 1, [1.0, 1.0, 1.0, 1.1])
    write_repeat(pt, 2, [1.0, 1.0, 1.04, 1.0])   # 4%: no node named
    res = analysis.load(s)
    assert res.runs.straggler_host.fillna("-").tolist() == ["node2", "node2", "-"]
    p = res.points.iloc[0]
    assert p.straggler == pytest.approx(1.1) and p.straggler_host == "node2"
    assert p.straggler_host_repeats == 2
    assert "| 1.10 (node2, 2/3) " in report.render(res).split("### Straggler ratio")[1]


def test_report_shows_marks_and_legend(sweep):
    text = report.render(analysis.load(sweep))
    resnet = text.split("## resnet50 (")[1].split("## bert_base")[0]
    ci = resnet.split("### Median's 95% confidence interval")[1].split("###")[0]
    row = next(line for line in ci.splitlines() if line.startswith("| pytorch"))
    assert [c.strip() for c in row.split("|")[5:-1]] == ["64.0..100.0 C", "(160.0..160.0)"]
    assert "C = spread too wide: CV across repeats above 5%" in ci
    speedup = resnet.split("### Speedup over 1 device")[1].split("###")[0]
    row = next(line for line in speedup.splitlines() if line.startswith("| pytorch"))
    assert [c.strip() for c in row.split("|")[5:-1]] == ["1.00 C", "2.00 B"]
    # the throughput table keeps its figures as they were
    tp = resnet.split("### Throughput")[1].split("###")[0]
    row = next(line for line in tp.splitlines() if line.startswith("| pytorch"))
    assert [c.strip() for c in row.split("|")[5:-1]] == ["80.0", "160.0"]
    bert = text.split("## bert_base (")[1].split("## resnet50")[0]
    assert "(114.3..114.3) D" in bert and "D = drift" in bert
    # the detail tables follow every model's main tables (report.html folds them)
    details = text.split("## bert_base: details")[1].split("## resnet50: details")[0]
    steps = details.split("### Step time per rank")[1].split("###")[0]
    assert "| 100 / 200 / 300 " in steps
    assert "| 1.17 (node1, 3/3) " in details.split("### Straggler ratio")[1].split("###")[0]


def test_few_repeats_and_partial_points(tmp_path):
    s = str(tmp_path)
    pt = write_point(s, ONE, repeats=3)
    write_repeat(pt, 0, [1.0])
    write_repeat(pt, 1, [1.0])
    write_repeat(pt, 2, [1.0], status="oom", error="OutOfMemoryError: x")
    p = analysis.load(s).points.iloc[0]
    assert p.status == "partial" and p.n_ok == 2 and p.marks == "N" and p.flag_few_repeats
    assert "(80.0..80.0)* N" in report.render(analysis.load(s))
    # a point without a figure has no flags: its status says it
    never = write_point(s, TWO, gpus_per_node=2)
    write_repeat(never, 0, [1.0, 1.0], status="oom", error="OutOfMemoryError: x")
    q = analysis.load(s).points.set_index("point").loc[TWO]
    assert q.status == "oom" and pd.isna(q.marks) and not q.flag_few_repeats


def test_cli_max_cv_and_points_csv(sweep, tmp_path):
    out = subprocess.run([sys.executable, "-m", "analysis", "report", sweep, "--no-plot",
                          "--max-cv", "0.2", "--out", str(tmp_path / "rep")], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    points = pd.read_csv(tmp_path / "rep" / "points.csv").set_index("point")
    for column in ("ci_lo", "ci_hi", "ci_coverage", "step_p50", "step_p90", "step_p99",
                   "straggler", "drift", "marks", "flag_spread", "flag_few_repeats",
                   "flag_drift", "flag_baseline", "speedup_marks", "energy_per_sample_j",
                   "energy_per_token_j", "power_per_device_w", "energy_too_short", "energy_reason"):
        assert column in points, column
    # CV 16.5% is under 20%: no flag, and no flagged baseline for the 2-device speedup
    assert not points.loc[ONE].flag_spread and not points.loc[TWO].flag_baseline
    assert points.loc[BERT].marks == "D" and points.loc[BERT].step_p90 == pytest.approx(0.2)
    assert "C = spread" not in out.stdout and "| 2.00 " in out.stdout
    runs = pd.read_csv(tmp_path / "rep" / "runs.csv")
    assert {"straggler", "drift", "energy_j", "energy_per_sample_j", "power_per_device_w",
            "energy_reason"} <= set(runs.columns)
    bad = subprocess.run([sys.executable, "-m", "analysis", "report", sweep, "--max-cv", "x"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--max-cv" in bad.stderr


@pytest.mark.parametrize("where", ["out", "html"])
def test_a_report_that_cannot_be_written_is_one_line_and_exit_2(sweep, tmp_path, where):
    """A report folder under a file, or a page in a folder that does not exist: one line
    naming the path, exit 2, no traceback."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    target = {"out": ["--out", str(blocker / "rep")],
              "html": ["--out", str(tmp_path / "rep"), "--html", str(tmp_path / "none" / "r.html")]}
    out = subprocess.run([sys.executable, "-m", "analysis", "report", sweep, "--no-plot",
                          *target[where]], cwd=ROOT, capture_output=True, text=True, timeout=120)
    missing = str(blocker / "rep") if where == "out" else str(tmp_path / "none" / "r.html")
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [
        f"error: cannot write the report to {missing}: "
        + ("Not a directory" if where == "out" else "No such file or directory")]


def test_a_reader_that_goes_away_ends_the_printing_not_the_report(sweep, tmp_path):
    """`report SWEEP | head`: the pipe closed before the report prints: no traceback, exit
    0, and the files are all written."""
    read_end, write_end = os.pipe()
    os.close(read_end)   # the reader has gone: every write to the pipe is EPIPE
    try:
        out = subprocess.run([sys.executable, "-m", "analysis", "report", sweep, "--no-plot",
                              "--out", str(tmp_path / "rep")], cwd=ROOT, stdout=write_end,
                             stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert out.returncode == 0 and out.stderr == ""
    assert {p.name for p in (tmp_path / "rep").iterdir()} >= {"points.csv", "runs.csv",
                                                              "steps.parquet", "report.html"}
