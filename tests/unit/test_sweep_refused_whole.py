"""Every point of a sweep is checked before any runs or is queued: one impossible point
costs one line, a non-zero exit and nothing run (launchers/plan/sweep.py). Real `python -m
launch` runs on the default launcher, with no Slurm cluster."""
import os
import shutil
import subprocess
import sys

import pytest

from launchers.suite import ROOT


def launch(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["SLURM_CONF"] = "/nonexistent/dlbench/slurm.conf"  # launcher=auto: local
    return subprocess.run([sys.executable, "-m", "launch", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env=env)


@pytest.mark.parametrize("sweep,message,refused", [
    # the design's command in its smoke form: point 0 (nodes=1) alone could run
    (["framework=pytorch", "nodes=1,2"], "launcher=local runs on one node; nodes=2 needs "
     "launcher=slurm (sweep point 1: framework=pytorch nodes=2 preset=smoke; 1 of 2", 1),
    (["model.size=tiny,huge,giant", "launcher=local"], "unknown model.size 'huge' for resnet50", 2),
])
def test_one_impossible_point_refuses_the_sweep(tmp_path, sweep, message, refused):
    res = launch("-m", *sweep, "preset=smoke", f"hydra.sweep.dir={tmp_path}")
    assert res.returncode == 2
    assert res.stderr.startswith(f"error: {message}"), res.stderr
    assert f"{refused} of " in res.stderr and "none was run" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    assert not (tmp_path / "points").exists()  # nothing written, nothing ran
    assert "repeat 0" not in res.stdout


def test_a_single_point_keeps_its_plain_message(tmp_path):
    res = launch("nodes=2", "preset=smoke", f"hydra.run.dir={tmp_path}")
    assert res.returncode == 2
    assert res.stderr.strip() == "error: launcher=local runs on one node; nodes=2 needs launcher=slurm"


@pytest.mark.skipif(not shutil.which("sbatch") or not shutil.which("srun"), reason="no sbatch here")
def test_sbatch_refusing_a_sweep_is_one_line(tmp_path):
    """Issue 52: launcher=slurm where no Slurm is configured printed sbatch's raw error lines
    (submitit's echo of its stderr) before the one line that says them."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("")   # sbatch refuses at once: ClusterName needs to be specified
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    res = subprocess.run([sys.executable, "-m", "launch", "preset=smoke", "launcher=slurm",
                          "cluster=localtest", f"hydra.run.dir={tmp_path / 'sweep'}"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, env=dict(env, SLURM_CONF=str(conf)))
    assert res.returncode == 2
    assert res.stderr.startswith("error: sbatch refused 000-pytorch-resnet50-fp32-1x1-bs4: sbatch: ")
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
