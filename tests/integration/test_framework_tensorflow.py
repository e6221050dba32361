"""TensorFlow adapter (frameworks/tensorflow): models, a real sweep, 2 ranks, XLA.

Needs `make -f mk/frameworks.mk env-tensorflow` (.venvs/tensorflow); skips otherwise.
Tiny models and the smoke preset keep the file to about two minutes on 2 cores.
"""
import glob
import json
import math
import os
import re
import subprocess
import sys

import pytest

from tests.frameworks_env import ROOT, model_cfg, parameter_count, require_env, run_in_env

NAME = "tensorflow"
pytestmark = pytest.mark.framework


CASES = [(m, s) for m in ("resnet50", "bert_base") for s in ("tiny", "full")]


@pytest.fixture(scope="module")
def tf_python():
    return require_env(NAME)


@pytest.fixture(scope="module")
def tf_counts(tf_python):
    """frameworks.tensorflow.models.parameter_count for every case, in one process of the
    TensorFlow env (what tests.frameworks_env.parameter_count does per case; importing
    TensorFlow once instead of four times saves about 20 s)."""
    code = ("import json, sys; from frameworks.tensorflow.models import parameter_count; "
            "print(json.dumps([parameter_count(c) for c in json.loads(sys.argv[1])]))")
    cfgs = [model_cfg(m, s) for m, s in CASES]
    counts = json.loads(run_in_env(tf_python, code, json.dumps(cfgs)).strip().splitlines()[-1])
    return dict(zip(CASES, counts))


def test_counting_through_the_shared_helper(tf_python):
    """The generic helper reaches the same function (import through the repo root)."""
    assert parameter_count(NAME, "resnet50", "tiny") == parameter_count("pytorch", "resnet50", "tiny")


@pytest.mark.parametrize("model,size", CASES)
def test_parameter_counts_match_pytorch(tf_counts, model, size):
    ours, reference = tf_counts[(model, size)], parameter_count("pytorch", model, size)
    assert abs(ours - reference) <= 0.005 * reference, (ours, reference)


def sweep(tmp_path, *overrides, timeout=300):
    """Run `python -m launch -m ...` for this framework; return the sweep's repeat-00 folders."""
    argv = [sys.executable, "-m", "launch", "-m", f"framework={NAME}", "preset=smoke",
            "repeats=1", f"output_root={tmp_path}", *overrides]
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    repeats = sorted(glob.glob(str(tmp_path / "*" / "points" / "*" / "repeat-00")))
    assert repeats, out.stdout + out.stderr
    return repeats


def read_ok(repeat_dir, world_size=1):
    """Assert the repeat and all its ranks are ok with finite losses; return the rank records."""
    with open(os.path.join(repeat_dir, "run.json")) as f:
        run = json.load(f)
    logs = "".join(open(p).read()[-1500:] for p in glob.glob(os.path.join(repeat_dir, "*.log")))
    assert run["status"] == "ok", (repeat_dir, run["error"], logs)
    assert run["world_size"] == world_size
    ranks = []
    for path in sorted(glob.glob(os.path.join(repeat_dir, "rank-*.json"))):
        with open(path) as f:
            rec = json.load(f)
        assert rec["status"] == "ok", rec["error"]
        assert rec["framework"]["name"] == NAME and rec["framework"]["version"].startswith("2.")
        assert rec["world_size"] == world_size
        spec = rec["spec"]
        measured = [s for s in rec["steps"] if s["phase"] == "measure"]
        assert len(measured) == spec["measure_steps"]
        assert all(math.isfinite(s["loss"]) for s in rec["steps"])
        assert rec["window"]["end"] > rec["window"]["start"]
        env = rec["environment"]
        assert env["device"] == "cpu" and env["keras"].startswith("3.")
        assert env["policy"] == ("mixed_bfloat16" if spec["precision"] == "amp" else "float32")
        assert env["jit_compile"] is bool(spec["compile"])
        ranks.append(rec)
    assert len(ranks) == world_size
    return ranks


def checksums(repeat_dir):
    """The parameter checksum each rank logs when it closes (frameworks/tensorflow/worker.py)."""
    found = {}
    for path in glob.glob(os.path.join(repeat_dir, "rank-*.log")):
        m = re.search(r"tensorflow rank (\d+): parameter checksum after (\d+) steps: (\S+)",
                      open(path).read())
        assert m, path
        found[int(m.group(1))] = (int(m.group(2)), float(m.group(3)))
    return found


def test_sweep_both_models_fp32_and_amp(tf_python, tmp_path):
    repeats = sweep(tmp_path, "model=resnet50,bert_base", "precision=fp32,amp")
    assert len(repeats) == 4
    for rdir in repeats:
        (rec,) = read_ok(rdir)
        assert rec["environment"]["jit_compile"] is False


def test_two_ranks_agree(tf_python, tmp_path):
    """MultiWorkerMirroredStrategy over 2 CPU processes: each rank trains on its own
    batch (seed + rank), so equal parameters after the run mean the gradients were
    all-reduced."""
    repeats = sweep(tmp_path, "model=resnet50,bert_base", "precision=fp32", "gpus_per_node=2")
    assert len(repeats) == 2
    for rdir in repeats:
        r0, r1 = read_ok(rdir, world_size=2)
        assert r0["environment"]["strategy"] == "MultiWorkerMirroredStrategy"
        assert r0["environment"]["communication"] == "RING"
        assert r0["environment"]["replicas"] == 2
        # Different data per rank: the losses of the first step differ ...
        assert r0["steps"][0]["loss"] != r1["steps"][0]["loss"]
        sums = checksums(rdir)
        steps = r0["spec"]["warmup_steps"] + r0["spec"]["measure_steps"]
        assert sums[0][0] == sums[1][0] == steps
        # ... but the weights stay identical.
        assert sums[0][1] == pytest.approx(sums[1][1], rel=1e-9), sums


def test_xla_jit_compile(tf_python, tmp_path):
    """jit_compile=True on both models under bf16 AMP, the combination most likely to break
    (fp32 + XLA is the same code path with the float32 policy; XLA compiling takes
    5-10 s a point here, so the file runs only these two)."""
    repeats = sweep(tmp_path, "model=resnet50,bert_base", "precision=amp", "compile=true")
    assert len(repeats) == 2
    for rdir in repeats:
        assert rdir.split(os.sep)[-2].endswith("-compile")
        (rec,) = read_ok(rdir)
        assert rec["environment"]["jit_compile"] is True
        assert rec["environment"]["jit_scope"] == "step"
