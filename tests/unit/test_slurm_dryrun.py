"""launcher=slurm without a cluster: the dry run against golden files, and the pure parts
(step environment, ports, submission environment, Slurm states, status from records).

Regenerate the goldens after an intended change with
    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/test_slurm_dryrun.py
"""
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from launchers.backends import ports
from launchers.backends.slurm import job as slurm_job, sacct, srun as srun_step
from launchers.backends.slurm.launcher import SlurmLauncher
from launchers.commands import status
from launchers.plan import points
from launchers.suite import ROOT
from tests import sweepfiles
from tests.unit.test_points import cfg_of

GOLDEN = Path(__file__).parent / "golden"


def dry_run(tmp_path, *overrides, multirun=False):
    out = tmp_path / "sweep"
    where = f"hydra.sweep.dir={out}" if multirun else f"hydra.run.dir={out}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SUBMITIT_"))}
    res = subprocess.run([sys.executable, "-m", "launch", *(["-m"] if multirun else []), *overrides,
                          "launcher=slurm", "dry_run=true", where], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert not (out / "points").exists(), "a dry run writes no point"
    # Stable across machines: the sweep folder, the interpreter, the checkout.
    text = res.stdout.replace(str(out), "<SWEEP>").replace(sys.executable, "<PYTHON>")
    return text.replace(str(ROOT), "<ROOT>")


def check_golden(name: str, text: str):
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no golden {path}; run with UPDATE_GOLDEN=1 to write it"
    assert text == path.read_text(), f"dry run differs from {path} (UPDATE_GOLDEN=1 rewrites it)"


def test_example_site_with_containers(tmp_path):
    text = dry_run(tmp_path, "framework=pytorch,tensorflow", "nodes=2", "gpus_per_node=8",
                   "repeats=2", "cluster=example_site", multirun=True)
    check_golden("slurm_example_site.txt", text)
    # what the golden holds, said plainly
    # the two points have one allocation shape: one job array, one sbatch script
    assert text.count("#SBATCH --partition=gpu") == 1 and "#SBATCH --account=dl-benchmarks" in text
    assert "#SBATCH --array=0-1%2" in text and "#SBATCH --output=<SWEEP>/slurm/%A_%a_0_log.out" in text
    assert "#SBATCH --gpus-per-node=8" in text and "#SBATCH --ntasks-per-node=8" in text
    assert "#SBATCH --requeue" in text and "#SBATCH --signal=B:USR2@120" in text
    assert "exec <PYTHON> -u -m submitit.core._submit" in text  # the driver, once, not under srun
    assert "'--container-image=nvcr.io#nvidia/pytorch:24.05-py3'" in text
    assert "'--container-image=nvcr.io#nvidia/tensorflow:24.05-tf2-py3'" in text
    assert "--container-mounts=<ROOT>:<ROOT>,<SWEEP>:<SWEEP>,/lustre/datasets:/datasets:ro" in text
    assert "NCCL_IB_HCA=mlx5" in text and "NCCL_DEBUG=WARN" in text
    # inside a container the image's python runs the worker, not .venvs/tensorflow
    assert " python -m frameworks --spec <SWEEP>/points/001-tensorflow" in text


def test_localtest(tmp_path):
    text = dry_run(tmp_path, "nodes=2", "gpus_per_node=2", "preset=smoke", "cluster=localtest")
    check_golden("slurm_localtest.txt", text)
    assert "--gpus-per-node=2" in text and "--container" not in text
    assert text.count("srun --nodes=2 --ntasks=4 --ntasks-per-node=2 --kill-on-bad-exit=0") == 2
    assert "<PYTHON> -m frameworks --spec <SWEEP>/points/000-pytorch-resnet50-fp32-2x2-bs4/repeat-01/spec.json" in text


def test_preflight_runs_the_health_step_first_in_the_pytorch_container(tmp_path):
    """On a site with containers the health step runs in the PyTorch image (NCCL's links),
    whatever the point's framework."""
    text = dry_run(tmp_path, "framework=tensorflow", "nodes=2", "gpus_per_node=8", "cluster=example_site",
                   "preflight=true", "health.timeout_s=200")
    head, _, rest = text.partition("# preflight=true: first the health checks, one step (docs/health.md):\n")
    line = rest.splitlines()[0]
    assert line.startswith("srun --nodes=2 --ntasks=16 --ntasks-per-node=8 --kill-on-bad-exit=0 --time=5 ")
    assert "--output=<SWEEP>/points/000-tensorflow-resnet50-fp32-2x8-bs8/health/attempt-00/rank-%5t.log" in line
    assert "'--container-image=nvcr.io#nvidia/pytorch:24.05-py3'" in line
    assert line.endswith(" python -m healthchecks.rank --spec "
                         "<SWEEP>/points/000-tensorflow-resnet50-fp32-2x8-bs8/health/attempt-00/spec.json")
    assert rest.index("# repeat 0:") > 0  # then the repeats


def make(*overrides):
    return points.make_point(cfg_of("launcher=slurm", *overrides), "/sweep", 0)


def test_too_many_gpus_per_node_is_refused():
    with pytest.raises(points.ConfigError, match="more than cluster localtest has per node"):
        SlurmLauncher().check(make("cluster=localtest", "gpus_per_node=3"))


def test_no_gpus_asked_where_the_site_has_none():
    point = make("cluster=local", "nodes=2", "gpus_per_node=2", "preset=smoke")
    argv = srun_step.repeat_argv(point, "/s/spec.json", "/s", "py", 10)
    assert not any(a.startswith("--gpus") for a in argv)
    assert "gpus_per_node" not in slurm_job.executor_parameters(point)
    assert argv[-5:] == ["py", "-m", "frameworks", "--spec", "/s/spec.json"]


def test_time_limits():
    point = make("cluster=localtest", "preset=smoke")  # 2 repeats x (300 + 60) s + 120 s
    assert srun_step.time_limit_min(point) == 14
    assert srun_step.time_limit_min(make("cluster=localtest")) == 15  # capped by max_time_min
    assert srun_step.time_limit_min(make("cluster=localtest", "launcher.time_min=3")) == 3
    assert srun_step.step_time_min(point, 14) == 6 and srun_step.step_time_min(point, 3) == 3


def test_ports_differ_between_repeats_requeues_and_jobs():
    point = make("cluster=localtest", "nodes=2", "gpus_per_node=2")  # blocks of 4 + 2 ports
    waiting = set()  # ports a finished step left in TIME_WAIT on the first node: not free

    def step(job):
        port = srun_step.master_port(point, job, free=lambda p: p not in waiting)
        waiting.update(range(port, port + ports.span(point.world_size)))
        return port
    # consecutive steps: the next repeat, and the same repeat rerun after a requeue
    first, second, requeued = step(41), step(41), step(41)
    assert len({first, second, requeued}) == 3
    waiting.clear()
    assert srun_step.master_port(point, 41) != srun_step.master_port(point, 42)
    assert srun_step.master_port(point, 41, free=lambda p: True) == ports.block(41, 4).start
    assert all(20000 <= p < 32000 for p in (first, second, requeued))


def test_the_step_port_is_a_block_free_on_the_drivers_node():
    point = make("cluster=localtest", "nodes=2", "gpus_per_node=2")
    start = ports.block(7, 4).start
    with socket.socket() as held:  # the preferred block's last port is taken here
        try:
            held.bind(("", start + 5))
        except OSError:
            pytest.skip(f"port {start + 5} is in use on this machine")
        port = srun_step.master_port(point, 7)
    assert port != start and ports.block(7, 4).stop <= port


def test_step_env_drops_stale_rank_and_step_variables():
    point = make("cluster=localtest", "+cluster.env.NCCL_DEBUG=INFO")
    base = {"PATH": "/bin", "RANK": "3", "WORLD_SIZE": "9", "MASTER_PORT": "1", "SLURM_JOB_ID": "7",
            "SLURM_JOB_NODELIST": "node[1-2]", "SLURM_STEP_ID": "4", "SLURM_PROCID": "2",
            "SLURM_CONF": "/etc/slurm.conf"}
    env = srun_step.step_env(point, "node1", 20071, base=base)
    assert "RANK" not in env and "WORLD_SIZE" not in env and "SLURM_STEP_ID" not in env
    assert "SLURM_PROCID" not in env
    assert env["SLURM_JOB_ID"] == "7" and env["SLURM_CONF"] == "/etc/slurm.conf"
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("node1", "20071")
    assert env["NCCL_DEBUG"] == "INFO" and env["OMP_NUM_THREADS"] == "1"
    assert env["PYTHONPATH"] == str(ROOT)


def test_submission_environment_has_no_outer_job(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "99")
    monkeypatch.setenv("SLURM_NTASKS", "64")
    monkeypatch.setenv("SRUN_CPUS_PER_TASK", "8")
    monkeypatch.setenv("SLURM_CONF", "/x/slurm.conf")
    with slurm_job.submission_environ():
        assert "SLURM_JOB_ID" not in os.environ and "SLURM_NTASKS" not in os.environ
        assert "SRUN_CPUS_PER_TASK" not in os.environ
        assert os.environ["SLURM_CONF"] == "/x/slurm.conf"
    assert os.environ["SLURM_JOB_ID"] == "99"


@pytest.mark.parametrize("raw,state", [
    ("CANCELLED by 0", "CANCELLED"), ("OUT_OF_MEMORY", "OOM"), ("REQUEUED", "PENDING"),
    ("COMPLETING", "RUNNING"), ("NODE_FAIL", "FAILED"), ("TIMEOUT", "TIMEOUT"),
    ("PREEMPTED", "CANCELLED"), ("COMPLETED", "COMPLETED"), ("", None)])
def test_slurm_states(raw, state):
    assert sacct.normalize(raw) == state


def test_status_of_a_local_sweep_comes_from_records(tmp_path, capsys):
    good = sweepfiles.write_point(tmp_path, "000-pytorch-resnet50-fp32-1x1-bs8", repeats=2)
    for r in range(2):
        sweepfiles.write_repeat(good, r, [1.0])
    bad = sweepfiles.write_point(tmp_path, "001-pytorch-resnet50-fp32-1x2-bs8", repeats=1,
                                 gpus_per_node=2)
    sweepfiles.write_repeat(bad, 0, [1.0, 1.0], status="oom", error="OutOfMemoryError: x")
    half = sweepfiles.write_point(tmp_path, "002-pytorch-resnet50-fp32-1x4-bs8", repeats=2,
                                  gpus_per_node=4)
    sweepfiles.write_repeat(half, 0, [1.0] * 4)
    assert status.main([str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["point", "state", "ok/rec/exp", "job", "detail"]
    assert lines[1].split()[1:4] == ["COMPLETED", "2/2/2", "-"]
    assert lines[2].split()[1:3] == ["OOM", "0/1/1"] and "OutOfMemoryError: x" in lines[2]
    assert lines[3].split()[1:3] == ["INCOMPLETE", "1/1/2"] and "1 repeat(s) not recorded" in lines[3]
    assert status.main([str(tmp_path), "--wait", "--interval", "0"]) == 1  # all final, not all ok


def slurm_point(runs, expected=2):
    return {"name": "p", "expected": expected, "running": [], "slurm": {"job_id": "5", "log": "L"},
            "runs": {r: {"repeat": r, "status": s, "error": None if s == "ok" else f"{s}!"}
                     for r, s in enumerate(runs)}}


@pytest.mark.parametrize("runs,slurm_state,state,detail", [
    (["ok"], "RUNNING", "RUNNING", ""),
    (["ok", "ok"], "COMPLETED", "COMPLETED", ""),
    (["ok", "failed"], "FAILED", "FAILED", "repeat 1: failed!"),
    (["ok", "timeout"], "FAILED", "TIMEOUT", "repeat 1: timeout!"),
    (["ok"], "CANCELLED", "CANCELLED", "the job ended cancelled with 1 repeat(s) not recorded"),
    ([], "FAILED", "FAILED", "the job ended failed with 2 repeat(s) not recorded; driver log: L"),
    (["ok"], "PENDING", "PENDING", ""),   # requeued: waits to run its second repeat
    (["ok"], None, "INCOMPLETE", "1 repeat(s) not recorded; Slurm no longer knows job 5"),
])
def test_point_state_combines_slurm_and_records(runs, slurm_state, state, detail):
    p = slurm_point(runs)
    assert status.point_state(p, sweepfiles.slurm_live(p, slurm_state)) == (state, detail)
