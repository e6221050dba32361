"""A larger sweep (16 ranks x 200 timed steps) through the report, against figures known by
hand; and the scale benchmark's sweep generator (benchmarks/analysis_scale.py)."""
import importlib.util
import os
import subprocess
import sys

import pandas as pd
import pytest

import analysis
from tests.sweepfiles import write_point, write_repeat

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_report_of_16_ranks_x_200_steps(tmp_path):
    s = str(tmp_path / "sweep")
    # 1 rank: 200 steps x 8 samples in 0.32 s = 5000 samples/s
    write_repeat(write_point(s, "000-pytorch-resnet50-fp32-1x1-bs8", repeats=1), 0, [0.32], steps=200)
    # 16 ranks: 16 x 200 x 8 = 25600 samples; the slowest rank's window 2.56 s: 10000 samples/s
    big = write_point(s, "001-pytorch-resnet50-fp32-2x8-bs8", nodes=2, gpus_per_node=8, repeats=2)
    write_repeat(big, 0, [2.56 - 0.01 * r for r in range(16)], steps=200)
    write_repeat(big, 1, [2.56] * 16, steps=200)
    out = subprocess.run([sys.executable, "-m", "analysis", "report", s, "--no-plot"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    row = next(line for line in out.stdout.split("### Throughput")[1].splitlines()
               if line.startswith("| pytorch"))
    assert [c.strip() for c in row.split("|")[5:-1]] == ["5000.0", "10000.0"]
    assert "| 2.00 " in out.stdout.split("### Speedup")[1]
    points = pd.read_csv(os.path.join(s, "report", "points.csv")).set_index("devices")
    assert points.loc[16].throughput == pytest.approx(10000.0)
    assert points.loc[16].efficiency == pytest.approx(0.125)
    steps = pd.read_parquet(os.path.join(s, "report", "steps.parquet"))
    assert len(steps) == 201 + 2 * 16 * 201          # each rank: 1 warm-up + 200 timed steps
    timed = steps[(steps.point == "001-pytorch-resnet50-fp32-2x8-bs8") & (steps.phase == "measure")]
    assert timed.samples.sum() == 2 * 25600 and timed.groupby("repeat")["rank"].nunique().eq(16).all()
    res = analysis.load(s)
    assert res.steps.duration.sum() == pytest.approx((steps.end - steps.start).sum())


def test_the_benchmarks_sweep_generator(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "analysis_scale", os.path.join(ROOT, "benchmarks", "analysis_scale.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    real = str(tmp_path / "real")
    write_repeat(write_point(real, "000-pytorch-resnet50-fp32-1x1-bs8", repeats=1), 0, [1.0], steps=5)
    g = bench.generate(real, str(tmp_path / "big"), 2, 4, 30)
    assert g["steps"] == 8 * 30 and g["files"] == 10
    res = analysis.load(str(tmp_path / "big"))
    p = res.points.iloc[0]
    assert p.status == "ok" and p.devices == 8 and p.throughput == pytest.approx(g["throughput"])
    assert len(res.steps) == 8 * 30 and set(res.steps.host) == {"node0000", "node0001"}
    assert len(bench.record_files(str(tmp_path / "big"))) == 10   # point.json, run.json, 8 ranks
