"""PaddlePaddle through the suite: model sizes, a real sweep, two ranks, to_static.

Needs .venvs/paddle (`make -f mk/frameworks.mk env-paddle`); skips without it.
What the records must say is docs/frameworks/paddle.md's table: fp32 trains eagerly
and under to_static, on one rank and on two (gloo); bf16 AMP trains under to_static
only, and an eager AMP run on a CPU fails with the reason.
"""
import glob
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.frameworks_env import amp_gap, assert_unsupported, parameter_count, require_env

pytestmark = pytest.mark.framework

ROOT = Path(__file__).resolve().parents[2]
NAME = "paddle"
AMP_EAGER_ERROR = "cannot run AMP on a CPU in dynamic-graph mode"


def sweep(tmp_path, *overrides, timeout=600):
    """Run `python -m launch -m ...` with the smoke preset; return {point: (run, [ranks])}."""
    out = subprocess.run(
        [sys.executable, "-m", "launch", "-m", f"framework={NAME}", "preset=smoke", "repeats=1",
         f"output_root={tmp_path}", *overrides],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    points = {}
    for pdir in sorted(glob.glob(str(tmp_path / "*" / "points" / "*"))):
        rdir = os.path.join(pdir, "repeat-00")
        with open(os.path.join(rdir, "run.json")) as f:
            run = json.load(f)
        ranks = []
        for path in sorted(glob.glob(os.path.join(rdir, "rank-*.json"))):
            with open(path) as f:
                ranks.append(json.load(f))
        points[os.path.basename(pdir)] = (run, ranks)
    assert points, out.stdout[-3000:]
    return points


def assert_trained(run, ranks, world_size=1):
    assert run["status"] == "ok", run["error"]
    assert len(ranks) == world_size
    for rec in ranks:
        assert rec["status"] == "ok", rec["error"]
        assert rec["world_size"] == world_size
        assert rec["framework"] == {"name": NAME, "version": "3.3.1"}
        measured = [s for s in rec["steps"] if s["phase"] == "measure"]
        assert len(measured) == rec["spec"]["measure_steps"] == 5
        assert all(math.isfinite(s["loss"]) for s in rec["steps"])
        assert rec["window"]["end"] > rec["window"]["start"]


def checksums(run_dir):
    """rank -> the parameter checksum the worker prints to its log at close()."""
    found = {}
    for log in glob.glob(os.path.join(run_dir, "rank-*.log")):
        with open(log) as f:
            m = re.search(r"paddle rank (\d+) parameter checksum: (.+)", f.read())
        assert m, f"no checksum in {log}"
        found[int(m.group(1))] = m.group(2).strip()
    return found


@pytest.mark.parametrize("model", ["resnet50", "bert_base"])
@pytest.mark.parametrize("size", ["full", "tiny"])
def test_parameter_count_matches_pytorch(model, size):
    require_env(NAME)
    ours, reference = parameter_count(NAME, model, size), parameter_count("pytorch", model, size)
    assert abs(ours - reference) <= 0.005 * reference, (ours, reference)


@pytest.mark.e2e
def test_sweep_fp32_trains_and_eager_amp_is_unsupported_plainly(tmp_path):
    require_env(NAME)
    points = sweep(tmp_path, "model=resnet50,bert_base", "precision=fp32,amp")
    assert len(points) == 4
    for name, (run, ranks) in points.items():
        if "-amp-" in name:
            # paddle.amp.auto_cast is a no-op on a CPU place in dygraph: refused, not faked.
            assert AMP_EAGER_ERROR in amp_gap(NAME)
            assert_unsupported(run, ranks, amp_gap(NAME))
            assert AMP_EAGER_ERROR in run["error"]
            assert ranks and AMP_EAGER_ERROR in ranks[0]["error"]
        else:
            assert_trained(run, ranks)
            assert ranks[0]["environment"]["device"] == "cpu"
            assert ranks[0]["environment"]["compile"] == "eager"


@pytest.mark.e2e
def test_two_ranks_gloo_data_parallel_agree(tmp_path):
    require_env(NAME)
    points = sweep(tmp_path, "model=resnet50,bert_base", "precision=fp32", "gpus_per_node=2")
    assert len(points) == 2
    for name, (run, ranks) in points.items():
        assert_trained(run, ranks, world_size=2)
        # Different data per rank, so different losses...
        losses = [[s["loss"] for s in r["steps"]] for r in ranks]
        assert losses[0] != losses[1]
        # ...but all-reduced gradients: the weights after the run are bitwise the same.
        sums = checksums(glob.glob(str(tmp_path / "*" / "points" / name / "repeat-00"))[0])
        assert sums[0] == sums[1], sums


@pytest.mark.e2e
def test_to_static_trains_fp32_and_bf16_amp(tmp_path):
    require_env(NAME)
    points = sweep(tmp_path, "model=resnet50,bert_base", "precision=fp32,amp", "compile=true")
    assert len(points) == 4
    for name, (run, ranks) in points.items():
        assert name.endswith("-compile")
        if "-amp-" in name and amp_gap(NAME, compile=True):  # a CPU without bf16: oneDNN aborts
            assert_unsupported(run, ranks, amp_gap(NAME, compile=True))
            continue
        assert_trained(run, ranks)
        env = ranks[0]["environment"]
        assert env["compile"] == "paddle.jit.to_static"
        assert env["amp"] == ("auto_cast O1 bfloat16" if "-amp-" in name else None)
