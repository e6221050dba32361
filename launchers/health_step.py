"""One health step: the checks of every node of an allocation shaped like a point's, as one
srun step inside it (Slurm) or as processes here (local), then the verdict.

    run_slurm(point, hdir, hosts, job_id, job_number)   inside an allocation: the driver's
                                                        preflight (launchers/preflight.py) and
                                                        `launch health`'s job (launchers/health.py)
    local.run_health(point, hdir)                       the local launcher: one node
                                                        (launchers/local.py)

Each rank runs frameworks/common/health_rank.py in the PyTorch framework's Python: the
suite's own here (it has torch), the site's PyTorch container where cluster.containers
names one (NCCL for the links on GPUs). The folder `hdir` gets the spec, the ranks'
records and logs, srun.log and the verdict (layout.HEALTH_FILE, launchers/health_verdict.py).
"""
import math
import os
import subprocess
import sys
import time

from frameworks.common import layout, records
from launchers import driver, health_verdict, points, srun_step

MODULE = "frameworks.common.health_rank"


def settings(point: dict) -> dict:
    """What every rank's checks read: the point's health settings, its devices per node and
    the site's NCCL_* settings (cluster.env)."""
    env = (point.get("cluster") or {}).get("env") or {}
    return dict(point["health"], gpus_per_node=point["gpus_per_node"],
                nccl_env={str(k): str(v) for k, v in env.items() if str(k).startswith("NCCL_")})


def write_spec(point: dict, hdir: str) -> str:
    os.makedirs(hdir, exist_ok=True)
    path = os.path.join(hdir, layout.SPEC_FILE)
    timeout = float(point["health"]["timeout_s"])
    records.write_json_atomic(path, {
        "schema": layout.HEALTH_SPEC_SCHEMA, "version": layout.SCHEMA_VERSION,
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


def finish(point: dict, hdir: str, hosts: list, ended_by: str = None) -> dict:
    """Read the ranks' records, judge them, write the verdict beside them."""
    recs = {r: rec for r, rec in driver.read_rank_records(hdir, point["world_size"]).items()}
    verdict = health_verdict.judge(recs, hosts, point["gpus_per_node"], point["health"], ended_by)
    verdict.update(point=point.get("point"), nodes_requested=point["nodes"], ended_by=ended_by,
                   ended_unix=time.time())
    records.write_json_atomic(os.path.join(hdir, layout.HEALTH_FILE), verdict)
    return verdict


def read_verdict(hdir: str):
    return records.read_json(os.path.join(hdir, layout.HEALTH_FILE))


def run_slurm(point: dict, hdir: str, hosts: list, job_id: str, job_number: str, log=print) -> dict:
    """The step in this allocation (the caller runs on its first node, as the driver does)."""
    spec = write_spec(point, hdir)
    timeout = float(point["health"]["timeout_s"])
    hp = as_pytorch(point)
    argv = srun_step.srun_argv(hp, spec, hdir, sys.executable, 0,
                               command=command(point, spec, sys.executable),
                               time_min=math.ceil(timeout / 60) + 1)
    port = srun_step.master_port(point, job_number)
    env = srun_step.step_env(point, hosts[0], port)
    log(f"health step on {', '.join(hosts)}: {' '.join(argv)}")
    ended_by = None
    with open(os.path.join(hdir, layout.SRUN_LOG), "w") as out:
        proc = subprocess.Popen(argv, cwd=points.ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        ended_by = f"the health step passed health.timeout_s={timeout:g}"
        srun_step.scancel_steps(job_id, signal="TERM")
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return finish(point, hdir, hosts, ended_by)
