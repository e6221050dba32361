"""Slurm launcher: one allocation per sweep point, submitted with submitit (docs/slurm.md).

    python -m launch -m framework=pytorch nodes=1,2,4 gpus_per_node=8 launcher=slurm cluster=mysite

`submit(point)` writes the point, submits ONE batch job for it (nodes x gpus_per_node
tasks, the cluster config's partition, account, GPUs, ...) and returns: submission does
not block. The batch job runs the driver once, on the allocation's first node, in the
suite's own Python (submitit with use_srun=False; launchers/slurm_driver.py); the driver
runs each repeat as its own `srun` job step whose argument list `srun_argv` builds here.
The job id goes to SWEEP/points/<point>/slurm.json; `python -m launch status SWEEP`
reads it. `dry_run=true` prints the sbatch script submitit would write and the srun line
of every repeat, and submits nothing.

Requeue: the job is `--requeue`able and the driver is a submitit Checkpointable; a
requeued allocation runs the driver again, which skips every repeat whose run.json exists.
"""
import contextlib
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import time

from frameworks.common import records
from launchers import points, sacct

SLURM_SCHEMA = "dlbench.slurm"
PORT_BASE, PORT_SLOTS, PORT_STRIDE = 20000, 1200, 10  # ports 20000..31999, below Linux's ephemeral range
# Variables of an outer job or step that must not reach a nested submission (sbatch exports
# the submitting environment into the job, and srun/sbatch read these as defaults).
OUTER_JOB_PREFIXES = ("SLURM_", "SRUN_", "SALLOC_")
KEEP = ("SLURM_CONF",)  # which cluster to talk to: the submitter's choice, not an outer job's
# Per-rank variables a worker prefers over Slurm's (frameworks/common/distenv.py): a stale
# RANK in the driver's environment would give every task the same rank.
RANK_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
# Per-step / per-task Slurm variables: srun sets its own; an inherited one would mislead.
STEP_PREFIXES = ("SLURM_STEP", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_TASK_PID",
                 "SLURM_GTIDS", "SLURM_CPU_BIND", "SLURM_SRUN_COMM", "SLURM_LAUNCH_NODE_IPADDR")


# ---- the point's settings ---------------------------------------------------------------
def _cluster(point) -> dict:
    return point.get("cluster") or {}


def _launcher(point) -> dict:
    return point.get("launcher") or {}


def container_image(point):
    """The framework's image: framework.container, else the site's containers.<framework>."""
    fw = point["framework"]
    return fw.get("container") or (_cluster(point).get("containers") or {}).get(fw["name"])


def time_limit_min(point) -> int:
    """The allocation's time limit: launcher.time_min, else enough for every repeat
    (timeout_s + step_overhead_s each, plus the requeue signal's lead), capped at the
    cluster's max_time_min. A point that needs more is requeued by its checkpoint."""
    ln, cl = _launcher(point), _cluster(point)
    if ln.get("time_min"):
        return int(ln["time_min"])
    need_s = point["repeats"] * (point["timeout_s"] + ln.get("step_overhead_s", 60)) \
        + ln.get("signal_delay_s", 120)
    need = math.ceil(need_s / 60)
    cap = cl.get("max_time_min")
    return min(need, int(cap)) if cap else need


def step_time_min(point, job_min: int) -> int:
    """srun --time for one repeat: a backstop just past timeout_s (the driver's own timer
    ends the step first), never above the allocation's limit."""
    return max(1, min(math.ceil(point["timeout_s"] / 60) + 1, job_min))


def master_port(job_id, repeat: int, restarts: int = 0) -> int:
    """Derived from the job id, so concurrent jobs sharing a first node do not collide, plus
    the repeat (and the requeue count), so consecutive steps never meet a port in TIME_WAIT."""
    return PORT_BASE + PORT_STRIDE * (int(job_id) % PORT_SLOTS) + (repeat + restarts) % PORT_STRIDE


def submitit_folder(point) -> str:
    return os.path.join(point["dir"], "slurm")


def sweep_dir(point) -> str:
    return os.path.dirname(os.path.dirname(point["dir"]))


# ---- the srun job step of one repeat ------------------------------------------------------
def worker_argv(point, spec_path: str, python: str) -> list:
    """The worker command: in the framework's container its own `python`, else the
    framework's interpreter (or ours) as on the local launcher."""
    if container_image(point):
        bare = dict(point, framework=dict(point["framework"], python=None))
        return points.worker_argv(bare, spec_path, _cluster(point).get("container_python") or "python")
    return points.worker_argv(point, spec_path, python)


def srun_argv(point, spec_path: str, rdir: str, python: str, job_min: int) -> list:
    """One repeat's job step as an argument list: one task per GPU on every node.

    --kill-on-bad-exit=0 (whatever the site's KillOnBadExit): the driver ends the step
    when a rank fails, after launcher.failure_grace_s, with signals. srun's own kill of the
    step is queued by the controller for a node that does not answer and delivered when the
    node is back, where it kills the same-numbered step of the requeued job (Slurm 22.05)."""
    cl = _cluster(point)
    gpn = point["gpus_per_node"]
    argv = ["srun", f"--nodes={point['nodes']}", f"--ntasks={point['world_size']}",
            f"--ntasks-per-node={gpn}", "--kill-on-bad-exit=0",
            f"--time={step_time_min(point, job_min)}",
            f"--output={os.path.join(rdir, 'rank-%5t.log')}", f"--chdir={points.ROOT}"]
    if cl.get("cpus_per_task"):
        argv.append(f"--cpus-per-task={int(cl['cpus_per_task'])}")
    if cl.get("gpus"):
        argv.append(f"--gpus-per-node={gpn}")
    image = container_image(point)
    if image:  # pyxis
        root, sweep = str(points.ROOT), sweep_dir(point)
        mounts = [f"{root}:{root}"]
        if not (sweep + os.sep).startswith(root + os.sep):
            mounts.append(f"{sweep}:{sweep}")
        mounts += [str(m) for m in cl.get("container_mounts") or []]
        argv += [f"--container-image={image}", f"--container-mounts={','.join(mounts)}",
                 f"--container-workdir={root}"]
    argv += [str(a) for a in cl.get("srun_args") or []]
    return argv + worker_argv(point, spec_path, python)


def step_env_additions(point, master_addr: str, port) -> dict:
    """What the driver adds to its environment for every rank of a step."""
    cl = _cluster(point)
    env = {str(k): str(v) for k, v in (cl.get("env") or {}).items()}
    env.update(MASTER_ADDR=str(master_addr), MASTER_PORT=str(port))
    # Ranks share the task's CPUs instead of each claiming the whole node.
    env.setdefault("OMP_NUM_THREADS", str(int(cl.get("cpus_per_task") or 1)))
    return env


def step_env(point, master_addr: str, port, base=None) -> dict:
    """The step's whole environment: the driver's own job's, minus stale per-rank and
    per-step variables, plus the additions; PYTHONPATH leads to the suite."""
    base = os.environ if base is None else base
    env = {k: v for k, v in base.items()
           if k not in RANK_VARIABLES and not k.startswith(STEP_PREFIXES)}
    env.update(step_env_additions(point, master_addr, port))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(points.ROOT), base.get("PYTHONPATH")]))
    return env


# ---- the batch job ------------------------------------------------------------------------
def executor_parameters(point) -> dict:
    """submitit SlurmExecutor parameters (sbatch options) for the point's allocation."""
    cl, ln = _cluster(point), _launcher(point)
    gpn = point["gpus_per_node"]
    params = {"job_name": f"dlbench-{point['point']}", "nodes": point["nodes"],
              "ntasks_per_node": gpn, "time": time_limit_min(point),
              "use_srun": False,          # the driver runs once, on the first node
              "stderr_to_stdout": True,   # one driver log: SWEEP/points/<p>/slurm/<job>_0_log.out
              "signal_delay_s": int(ln.get("signal_delay_s", 120))}
    if cl.get("gpus"):
        params["gpus_per_node"] = gpn
    for key in ("partition", "account", "qos", "constraint", "cpus_per_task", "mem"):
        if cl.get(key) not in (None, ""):
            params[key] = cl[key]
    if cl.get("exclusive"):
        params["exclusive"] = True
    extra = {
        "requeue": True,                  # preemption and `scontrol requeue` put it back in the queue
        # The requeue-before-the-time-limit signal goes to the batch shell only (the driver,
        # see `python` below), never to the job steps: the ranks would die of it.
        "signal": f"B:{_usr_sig()}@{params['signal_delay_s']}",
        "chdir": str(points.ROOT),        # the driver unpickles launchers.* from here
    }
    extra.update({str(k): v for k, v in (cl.get("sbatch_args") or {}).items()})
    params["additional_parameters"] = extra
    return params


def _usr_sig() -> str:
    from submitit.core.job_environment import JobEnvironment
    return JobEnvironment.USR_SIG


def make_executor(point, require_srun: bool = True):
    """submitit's SlurmExecutor for the point. The batch script `exec`s the driver's
    Python, so the driver IS the batch shell and gets the allocation's signals itself."""
    from submitit import SlurmExecutor

    class _Executor(SlurmExecutor):
        @classmethod
        def affinity(cls):  # a dry run needs no Slurm installed
            return SlurmExecutor.affinity() if require_srun else 2

    ex = _Executor(folder=submitit_folder(point),
                   max_num_timeout=int(_launcher(point).get("max_requeues", 3)),
                   python="exec " + shlex.quote(sys.executable))
    ex.update_parameters(**executor_parameters(point))
    return ex


def sbatch_script(point) -> str:
    """The sbatch script exactly as submitit writes it for this point."""
    ex = make_executor(point, require_srun=False)
    return ex._make_submission_file_text(ex._submitit_command_str, "dry-run")


@contextlib.contextmanager
def submission_environ():
    """os.environ without an outer job's Slurm variables, for the sbatch call (submitit
    runs sbatch with os.environ, and sbatch exports it into the job)."""
    saved = dict(os.environ)
    for key in [k for k in os.environ if k.startswith(OUTER_JOB_PREFIXES) and k not in KEEP]:
        del os.environ[key]
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


# ---- the launcher interface ---------------------------------------------------------------
SEARCH_HERE = ("search= runs with launcher=local for now: on Slurm each try would need its own "
               "srun step inside one allocation (not built yet)")


def check(point: dict) -> None:
    if point.get("search") is not None:
        raise points.ConfigError(SEARCH_HERE)
    cl = _cluster(point)
    most = cl.get("max_gpus_per_node")
    if cl.get("gpus") and most and point["gpus_per_node"] > int(most):
        raise points.ConfigError(f"gpus_per_node={point['gpus_per_node']} is more than cluster "
                                 f"{cl.get('name')} has per node ({most})")
    for key in ("srun_args", "container_mounts"):
        if not isinstance(cl.get(key) or [], list):
            raise points.ConfigError(f"cluster.{key} must be a list, got {cl.get(key)!r}")
    for key in ("sbatch_args", "env", "containers"):
        if not isinstance(cl.get(key) or {}, dict):
            raise points.ConfigError(f"cluster.{key} must be a mapping, got {cl.get(key)!r}")


def dry_run_text(point: dict) -> str:
    job_min = time_limit_min(point)
    out = [f"# ==== {point['point']}: one allocation of {point['nodes']} node(s) x "
           f"{point['gpus_per_node']} task(s); {point['repeats']} repeat(s), each an srun step",
           f"# sbatch script (submitit writes it to {submitit_folder(point)}/<job>_submission.sh):",
           sbatch_script(point).rstrip("\n"),
           "# step environment, added to the driver's (which drops stale RANK/WORLD_SIZE/... "
           "and per-step SLURM_* variables):"]
    adds = step_env_additions(point, "<first host of `scontrol show hostnames $SLURM_JOB_NODELIST`>",
                              f"<{PORT_BASE} + {PORT_STRIDE} * (job_id % {PORT_SLOTS}) + repeat>")
    adds["PYTHONPATH"] = f"{points.ROOT}:$PYTHONPATH"
    out += [f"#   {k}={v}" for k, v in adds.items()]
    for repeat in range(point["repeats"]):
        rdir = points.repeat_dir(point, repeat)
        try:
            argv = srun_argv(point, os.path.join(rdir, "spec.json"), rdir, sys.executable, job_min)
            line = shlex.join(argv)
        except points.WorkerUnavailable as exc:
            line = f"# not runnable: {exc}"
        out += [f"# repeat {repeat}:", line]
    return "\n".join(out)


def read_slurm_json(point_dir: str):
    try:
        with open(os.path.join(point_dir, "slurm.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def recorded(point: dict) -> int:
    return sum(os.path.exists(os.path.join(points.repeat_dir(point, r), "run.json"))
               for r in range(point["repeats"]))


def _active(job_id) -> bool:
    """Whether the controller still has the job pending or running."""
    return sacct.squeue_states([str(job_id)]).get(str(job_id)) in ("PENDING", "RUNNING")


def submit_search(point: dict, dry_run: bool = False) -> None:
    raise points.ConfigError(SEARCH_HERE)


def submit(point: dict, dry_run: bool = False) -> None:
    if dry_run:
        print(dry_run_text(point))
        return
    if not container_image(point):
        try:
            points.worker_argv(point, "spec.json", sys.executable)
        except points.WorkerUnavailable as exc:
            raise points.ConfigError(str(exc)) from None
    if shutil.which("sbatch") is None or shutil.which("srun") is None:
        raise points.ConfigError("launcher=slurm needs sbatch and srun on PATH (a Slurm login node)")
    previous = read_slurm_json(point["dir"])
    if previous and _active(previous["job_id"]):  # its driver reads this point.json: leave it be
        print(f"{point['point']}: already queued as Slurm job {previous['job_id']}")
        return
    fresh = not os.path.exists(os.path.join(point["dir"], "point.json"))
    points.write_point(point)
    if recorded(point) == point["repeats"]:
        print(f"{point['point']}: every repeat is recorded; nothing to submit")
        return
    from launchers.slurm_driver import PointDriver
    executor = make_executor(point)
    try:
        with submission_environ():
            job = executor.submit(PointDriver(point["dir"]))
    except Exception as exc:  # sbatch refused: say why in one line
        if fresh:  # leave no point that looks submitted
            shutil.rmtree(point["dir"], ignore_errors=True)
        message = " ".join(str(exc).split())
        raise points.ConfigError(f"sbatch refused {point['point']}: {message[-400:]}") from None
    info = {"schema": SLURM_SCHEMA, "version": records.SCHEMA_VERSION, "point": point["point"],
            "job_id": str(job.job_id), "submitit_folder": submitit_folder(point),
            "log": os.path.join(submitit_folder(point), f"{job.job_id}_0_log.out"),
            "submitted_unix": time.time(), "time_min": time_limit_min(point),
            "previous_jobs": ([previous["job_id"]] + previous.get("previous_jobs", [])) if previous else []}
    records.write_json_atomic(os.path.join(point["dir"], "slurm.json"), info)
    print(f"{point['point']}: queued as Slurm job {job.job_id}")


def scancel_steps(job_id, signal: str = None, timeout: float = 30) -> None:
    """Signal the job's running srun steps (not the job, not its batch shell): with
    `signal` (TERM: the ranks write their records and end; KILL), else cancel them. A
    signal to a node that does not answer fails after MessageTimeout; a cancel is queued
    until the node answers again (slurm_driver.PointDriver._stop)."""
    try:
        out = subprocess.run(["squeue", "-h", "-s", "-j", str(job_id), "-o", "%i"],
                             capture_output=True, text=True, timeout=timeout).stdout
    except (OSError, subprocess.SubprocessError):
        return
    steps = [s for s in out.split() if s.partition(".")[2].isdigit()]
    if steps:
        try:
            subprocess.run(["scancel", *([f"--signal={signal}"] if signal else []), *steps],
                           capture_output=True, timeout=timeout)
        except (OSError, subprocess.SubprocessError):
            pass
