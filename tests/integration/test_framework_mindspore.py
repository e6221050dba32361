"""MindSpore through the suite: parameter counts, and real sweeps on tiny models.

Needs .venvs/mindspore (`make env-mindspore`); every test skips without it.
What runs here and what does not is written up in docs/frameworks/mindspore.md.
"""
import glob
import json
import math
import os
import re
import subprocess
import sys

import pytest

from tests.frameworks_env import ROOT, amp_gap, assert_unsupported, parameter_count, require_env

NAME = "mindspore"
pytestmark = pytest.mark.framework

# MindSpore 2.10's CPU kernels have no bfloat16 Conv2D / Gather: the capability check says so.
BF16_ON_CPU = "MindSpore has no bf16 CPU kernels"


@pytest.fixture(scope="module")
def python():
    return require_env(NAME)


@pytest.mark.parametrize("model", ["resnet50", "bert_base"])
@pytest.mark.parametrize("size", ["tiny", "full"])
def test_parameter_count_matches_pytorch(python, model, size):
    ours, ref = parameter_count(NAME, model, size), parameter_count("pytorch", model, size)
    assert abs(ours - ref) <= 0.005 * ref, (ours, ref)


def sweep(tmp_path, *overrides, timeout=600):
    out = subprocess.run(
        [sys.executable, "-m", "launch", "-m", f"framework={NAME}", "preset=smoke", "repeats=1",
         f"output_root={tmp_path}", *overrides],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    points = {}
    for run_path in sorted(glob.glob(f"{tmp_path}/*/points/*/repeat-00/run.json")):
        rdir = os.path.dirname(run_path)
        ranks = [json.load(open(p)) for p in sorted(glob.glob(f"{rdir}/rank-*.json"))]
        points[os.path.basename(os.path.dirname(rdir))] = (json.load(open(run_path)), ranks, rdir)
    assert points, out.stdout[-3000:]
    return points


def assert_trained(run, ranks, world=1, measure_steps=5):
    assert run["status"] == "ok", run["error"]
    assert len(ranks) == world
    for rec in ranks:
        assert rec["status"] == "ok", rec["error"]
        assert rec["world_size"] == world
        assert rec["framework"] == {"name": NAME, "version": "2.10.0"}
        timed = [s for s in rec["steps"] if s["phase"] == "measure"]
        assert len(timed) == measure_steps
        assert all(math.isfinite(s["loss"]) for s in rec["steps"])


@pytest.mark.e2e
def test_sweep_fp32_trains_and_bf16_amp_is_unsupported_clearly(python, tmp_path):
    points = sweep(tmp_path, "model=resnet50,bert_base", "precision=fp32,amp")
    assert len(points) == 4
    for name, (run, ranks, _) in points.items():
        if "-amp-" in name:  # precision=amp's default dtype is bf16: no CPU kernels for it
            assert_unsupported(run, ranks, amp_gap(NAME))
            assert ranks[0]["error"].startswith(BF16_ON_CPU), ranks[0]["error"]
        else:
            assert_trained(run, ranks)
            assert ranks[0]["environment"]["mode"] == "PYNATIVE_MODE"


@pytest.mark.e2e
def test_graph_mode_fp32_and_fp16_amp(python, tmp_path):
    """compile=true is GRAPH_MODE with the step under mindspore.jit; fp16 AMP is O2 + loss scaling."""
    points = sweep(tmp_path, "model=resnet50,bert_base", "precision=fp32,amp",
                   "precision.amp_dtype=fp16", "compile=true")
    assert len(points) == 4
    for name, (run, ranks, _) in points.items():
        assert_trained(run, ranks)
        env = ranks[0]["environment"]
        assert env["mode"] == "GRAPH_MODE+jit"
        assert env["amp"] == ("O2 fp16" if "-amp-" in name else None)


@pytest.mark.e2e
def test_two_ranks_data_parallel_stay_in_sync(python, tmp_path):
    """Two CPU processes in MindSpore's dynamic cluster (rank 0 starts the scheduler), mccl
    all-reduce of gradients: each rank trains on its own batch, yet their weights agree."""
    points = sweep(tmp_path, "model=resnet50", "gpus_per_node=2")
    (run, ranks, rdir), = points.values()
    assert_trained(run, ranks, world=2)
    assert {r["environment"]["comm_backend"] for r in ranks} == {"mccl"}
    assert sorted(r["environment"]["ms_rank"] for r in ranks) == [0, 1]
    losses = [[s["loss"] for s in r["steps"]] for r in ranks]
    assert losses[0] != losses[1]  # different data per rank...
    sums = {}
    for rank in (0, 1):
        log = open(f"{rdir}/rank-{rank:05d}.log").read()
        sums[rank] = float(re.search(rf"mindspore rank {rank}: parameter checksum (\S+)", log).group(1))
    assert sums[0] == pytest.approx(sums[1], rel=1e-6)  # ...and the same weights after training
