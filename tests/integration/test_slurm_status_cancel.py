"""`launch status` and `launch cancel` on the real local Slurm cluster: one squeue and at most
one sacct call per status, one squeue and one scancel per cancel, counted by wrappers on PATH
that log each call and exec the real command (no result is faked); plain job ids and job
array tasks (`123_4`); a running sweep cancelled keeps its recorded repeats.
The timing at 1,000 points is a benchmark: benchmarks/status_scale.py."""
import os
import shutil
import subprocess
import sys

import pytest

from contract import paths, records
from launchers.suite import ROOT
from tests import sweepfiles
from tests.integration.test_slurm_launcher import (SMOKE, jload, launch, point_dirs, slurm,
                                                   status, status_lines, wait_for)

pytestmark = pytest.mark.slurm
COUNTED = ("squeue", "sacct", "scancel")


@pytest.fixture
def counted(tmp_path):
    """run(*args) -> (result, {command: calls}) of `python -m launch *args` with the Slurm
    clients wrapped: each call is logged, then the real client runs."""
    wrap, log = tmp_path / "wrap", tmp_path / "calls.log"
    wrap.mkdir()
    for name in COUNTED:
        (wrap / name).write_text(f'#!/bin/sh\necho {name} >> "{log}"\nexec {shutil.which(name)} "$@"\n')
        (wrap / name).chmod(0o755)
    env = dict(os.environ, PATH=f"{wrap}{os.pathsep}{os.environ['PATH']}")

    def run(*args):
        log.write_text("")
        res = subprocess.run([sys.executable, "-m", "launch", *args], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=120)
        calls = log.read_text().split()
        return res, {name: calls.count(name) for name in COUNTED}
    return run


def test_held_array_tasks_status_and_cancel_by_point(slurm_cluster, tmp_path, counted):
    sweep = tmp_path / "sweep"
    array = slurm("sbatch", "--parsable", "--hold", "--array=0-3", "--output=/dev/null", "--wrap=true")
    plain = slurm("sbatch", "--parsable", "--hold", "--output=/dev/null", "--wrap=true")
    jobs = [f"{array}_{i}" for i in range(4)] + [plain]
    try:
        for i, job in enumerate(jobs):
            p = sweepfiles.write_point(sweep, f"{i:03d}-pytorch-resnet50-fp32-1x1-bs4", repeats=1)
            records.write_json_atomic(os.path.join(p["dir"], paths.SLURM_FILE),
                                      {"schema": paths.SLURM_SCHEMA, "job_id": job, "log": "L"})
        res, calls = counted("status", str(sweep))
        assert res.returncode == 0, res.stderr
        assert calls == {"squeue": 1, "sacct": 0, "scancel": 0}  # squeue knew every job
        lines = status_lines(res.stdout)
        assert [v[:3] for v in lines.values()] == [("PENDING", "0/0/1", j) for j in jobs]
        assert all(v[3] == "waiting: JobHeldUser" for v in lines.values())

        res, calls = counted("cancel", str(sweep), "--point", "00[03]-*")
        assert res.returncode == 0, res.stderr
        assert calls == {"squeue": 1, "sacct": 0, "scancel": 1}
        assert f"cancelled 2 job(s) of {sweep}" in res.stdout
        res, calls = counted("status", str(sweep))
        assert calls["squeue"] == 1 and calls["sacct"] <= 1
        assert [v[0] for v in status_lines(res.stdout).values()] == \
            ["CANCELLED", "PENDING", "PENDING", "CANCELLED", "PENDING"]
        res, calls = counted("cancel", str(sweep))
        assert res.returncode == 0 and calls["scancel"] == 1
        assert "cancelled 3 job(s)" in res.stdout and "2 had already ended" in res.stdout
        assert [v[0] for v in status_lines(status(sweep).stdout).values()] == ["CANCELLED"] * 5
        assert all(jload(f"{d}/slurm.json").get("cancelled_unix") for d in point_dirs(sweep))
        res, calls = counted("cancel", str(sweep))
        assert res.returncode == 0 and "nothing to cancel" in res.stdout and calls["scancel"] == 0
    finally:
        slurm("scancel", array, plain)


def test_cancel_a_running_sweep_keeps_its_recorded_repeats(slurm_cluster, tmp_path, counted):
    res = launch("-m", *SMOKE, "nodes=1", "gpus_per_node=1", "repeats=2", "measure_steps=500",
                 "timeout_s=600", "seed=0,1", f"hydra.sweep.dir={tmp_path}")
    assert res.returncode == 0, res.stderr[-3000:]
    first, second = point_dirs(tmp_path)
    wait_for(lambda: os.path.exists(f"{first}/repeat-00/run.json"), timeout=240, what="repeat 0")
    wait_for(lambda: os.path.exists(f"{first}/repeat-01/step.json"), what="repeat 1 to start")
    res, calls = counted("status", str(tmp_path))
    assert calls["squeue"] == 1 and calls["sacct"] <= 1
    state, counts, job, detail = status_lines(res.stdout)[os.path.basename(first)]
    assert (state, counts) == ("RUNNING", "1/1/2"), res.stdout
    assert detail.startswith("running: repeat 2/2, "), res.stdout   # rank 0's heartbeat, or starting
    res, calls = counted("cancel", str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert calls == {"squeue": 1, "sacct": 0, "scancel": 1} and "cancelled 2 job(s)" in res.stdout
    waited = status(tmp_path, "--wait", "--timeout", "120", "--interval", "1")
    assert waited.returncode == 1, waited.stdout + waited.stderr
    lines = status_lines(waited.stdout)
    assert lines[os.path.basename(first)][:2] == ("CANCELLED", "1/1/2")
    assert lines[os.path.basename(second)][0] == "CANCELLED"
    assert jload(f"{first}/repeat-00/run.json")["status"] == "ok"  # recorded stays recorded
    assert not os.path.exists(f"{first}/repeat-01/run.json")  # the cut-short one is not counted
    assert slurm("sacct", "-X", "-n", "-P", "-o", "State", "-j", job).startswith("CANCELLED")
