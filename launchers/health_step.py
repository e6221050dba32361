"""One health step: the checks of every node of an allocation shaped like a point's, as one
srun step inside it (Slurm) or as processes here (local), then the verdict.

    run_slurm(point, hdir, hosts, job_id, job_number)   inside an allocation: the driver's
                                                        preflight (launchers/preflight.py) and
                                                        `launch health`'s job (launchers/health.py)
    local.run_health(point, hdir)                       the local launcher: one node
                                                        (launchers/local.py)

Each rank runs healthchecks/rank.py in the PyTorch framework's Python: the
suite's own here (it has torch), the site's PyTorch container where cluster.containers
names one (NCCL for the links on GPUs). The folder `hdir` gets the spec, the ranks'
records and logs, srun.log and the verdict (paths.HEALTH_FILE, launchers/health_verdict.py).
"""
import math
import os
import subprocess
import sys
import time

from contract import paths, records
from launchers import driver, health_verdict, points, srun_step
from launchers.step_watch import StepWatch

MODULE = "healthchecks.rank"
FAILURE_GRACE_S = 10  # after one rank fails, the others' time to write their records
POLL_S = 0.5


def settings(point: dict) -> dict:
    """What every rank's checks read: the point's health settings, its devices per node and
    the site's NCCL_* settings (cluster.env)."""
    env = (point.get("cluster") or {}).get("env") or {}
    return dict(point["health"], gpus_per_node=point["gpus_per_node"],
                nccl_env={str(k): str(v) for k, v in env.items() if str(k).startswith("NCCL_")})


def write_spec(point: dict, hdir: str) -> str:
    os.makedirs(hdir, exist_ok=True)
    path = os.path.join(hdir, paths.SPEC_FILE)
    timeout = float(point["health"]["timeout_s"])
    records.write_json_atomic(path, {
        "schema": paths.HEALTH_SPEC_SCHEMA, "version": paths.SCHEMA_VERSION,
        "point": point.get("point"), "nodes": point["nodes"], "gpus_per_node": point["gpus_per_node"],
        "device": point.get("device", "auto"), "settings": settings(point), "record_dir": hdir,
        # the links' collectives give up a little before the step does, so that ranks say why
        "link_timeout_s": max(10.0, timeout - 15)})
    return path


def as_pytorch(point: dict) -> dict:
    """The point as the health step runs it: in the PyTorch framework's Python or container."""
    return dict(point, framework={"name": "pytorch", "python": None, "container": None})


def command(point: dict, spec_path: str, python: str) -> list:
    if srun_step.container_image(as_pytorch(point)):
        python = srun_step.cluster(point).get("container_python") or "python"
    return [python, "-m", MODULE, "--spec", spec_path]


def srun_argv(point: dict, spec_path: str, hdir: str) -> list:
    """The health step's srun line: the point's shape, a rank per GPU, --time just past
    health.timeout_s (the caller's own timer ends the step first)."""
    return srun_step.srun_argv(as_pytorch(point), spec_path, hdir, sys.executable, 0,
                               command=command(point, spec_path, sys.executable),
                               time_min=math.ceil(float(point["health"]["timeout_s"]) / 60) + 1)


def finish(point: dict, hdir: str, hosts: list, ended_by: str = None, rank_ends=None,
           stopped=()) -> dict:
    """Read the ranks' records, judge them (`rank_ends`: how ranks that srun saw end badly
    ended; `stopped`: the ranks the step's stop ended), write the verdict beside them."""
    recs = driver.read_rank_records(hdir, point["world_size"])
    verdict = health_verdict.judge(recs, hosts, point["gpus_per_node"], point["health"], ended_by,
                                   rank_ends, stopped)
    verdict.update(point=point.get("point"), nodes_requested=point["nodes"], ended_by=ended_by,
                   ended_unix=time.time())
    records.write_json_atomic(os.path.join(hdir, paths.HEALTH_FILE), verdict)
    return verdict


def read_verdict(hdir: str):
    return records.read_json(os.path.join(hdir, paths.HEALTH_FILE))


def run_slurm(point: dict, hdir: str, hosts: list, job_id: str, job_number: str, log=print) -> dict:
    """The step in this allocation (the caller runs on its first node, as the driver does)."""
    spec = write_spec(point, hdir)
    timeout = float(point["health"]["timeout_s"])
    argv = srun_argv(point, spec, hdir)
    port = srun_step.master_port(point, job_number)
    env = srun_step.step_env(point, hosts[0], port)
    log(f"health step on {', '.join(hosts)}: {' '.join(argv)}")
    with open(os.path.join(hdir, paths.SRUN_LOG), "w") as out:
        proc = subprocess.Popen(argv, cwd=points.ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    watch = StepWatch(hdir, point["world_size"])
    try:
        ended_by, stopped = _watch(proc, watch, job_id, timeout)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    watch.poll()
    return finish(point, hdir, hosts, ended_by, watch.ends(), stopped)


def _watch(proc, watch, job_id: str, timeout: float):
    """Wait for the step; stop it past `timeout`, or FAILURE_GRACE_S after one rank failed
    or crashed (the others would wait on it in the links' collectives until theirs give
    up). -> (why it was stopped or None, the ranks the stop ended)."""
    deadline, failed_at, why = time.monotonic() + timeout, None, None
    while proc.poll() is None:
        watch.poll()
        if failed_at is None and watch.first_bad():
            failed_at = time.monotonic()
        if time.monotonic() >= deadline:
            why = f"the health step passed health.timeout_s={timeout:g}"
        elif failed_at is not None and time.monotonic() - failed_at >= FAILURE_GRACE_S:
            why = f"stopped {FAILURE_GRACE_S} s after {watch.first_bad()}"
        if why:
            stopped = watch.unended()
            # SIGTERM first (a rank writes its record); one blocked in a collective cannot
            # take it until the collective returns, so SIGKILL follows soon
            for sig, wait_s in (("TERM", 5), ("KILL", 10)):
                srun_step.scancel_steps(job_id, signal=sig)
                try:
                    proc.wait(timeout=wait_s)
                    break
                except subprocess.TimeoutExpired:
                    continue
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            return why, stopped
        try:
            proc.wait(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            pass
    return None, set()
