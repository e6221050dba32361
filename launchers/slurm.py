"""Slurm launcher: one allocation per sweep point, submitted with submitit (docs/slurm.md).

    python -m launch -m framework=pytorch nodes=1,2,4 gpus_per_node=8 launcher=slurm cluster=mysite

`submit_all(points)` writes the points and submits ONE batch job per point (nodes x
gpus_per_node tasks, the cluster config's partition, account, GPUs, ...), the points
whose sbatch options agree as one job array (one sbatch call, submitit's batch), and
returns: submission does not block. Each point is still its own array task: its own job
id (`123_4`), driver, log, requeue and cancel. The batch job runs the driver once, on the allocation's first node, in the
suite's own Python (submitit with use_srun=False; launchers/slurm_driver.py); the driver
runs each repeat as its own `srun` job step (launchers/srun_step.py builds its argument
list, environment and port; both this module and the driver import it).
The job id goes to SWEEP/points/<point>/slurm.json; `python -m launch status SWEEP`
reads it; submitit's files live in SWEEP/slurm/. `dry_run=true` prints the sbatch script
submitit would write (one per array) and the srun line of every repeat, and submits nothing.

Requeue: the job is `--requeue`able and the driver is a submitit Checkpointable; a
requeued allocation runs the driver again, which skips every repeat whose run.json exists.
"""
import contextlib
import json
import os
import shlex
import shutil
import sys
import time

from frameworks.common import layout, records
from launchers import points, sacct, slurm_driver, slurm_nodes, srun_step

# Variables of an outer job or step that must not reach a nested submission (sbatch exports
# the submitting environment into the job, and srun/sbatch read these as defaults).
OUTER_JOB_PREFIXES = ("SLURM_", "SRUN_", "SALLOC_")
KEEP = ("SLURM_CONF",)  # which cluster to talk to: the submitter's choice, not an outer job's


def submitit_folder(point) -> str:
    """One folder per sweep: a job array's tasks share submitit's folder."""
    return layout.submitit_dir(layout.sweep_of(point["dir"]))


# ---- the batch job ------------------------------------------------------------------------
def executor_parameters(point) -> dict:
    """submitit SlurmExecutor parameters (sbatch options) for the point's allocation."""
    cl, ln = srun_step.cluster(point), srun_step.launcher(point)
    gpn = point["gpus_per_node"]
    params = {"job_name": f"dlbench-{point['point']}", "nodes": point["nodes"],
              "ntasks_per_node": gpn, "time": srun_step.time_limit_min(point),
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


def make_executor(point, require_srun: bool = True, array: int = 0, job_name: str = None):
    """submitit's SlurmExecutor for the point, or for a job array of `array` points shaped
    like it. The batch script `exec`s the driver's Python, so the driver IS the batch shell
    and gets the allocation's signals itself."""
    from submitit import SlurmExecutor

    class _Executor(SlurmExecutor):
        @classmethod
        def affinity(cls):  # a dry run needs no Slurm installed
            return SlurmExecutor.affinity() if require_srun else 2

    ex = _Executor(folder=submitit_folder(point),
                   max_num_timeout=int(srun_step.launcher(point).get("max_requeues", 3)),
                   python="exec " + shlex.quote(sys.executable))
    ex.update_parameters(**executor_parameters(point))
    if array > 1:  # every task of the array may run at once: no throttle of submitit's own
        ex.update_parameters(array_parallelism=array, **({"job_name": job_name} if job_name else {}))
    return ex


def sbatch_script(point, array: int = 0, job_name: str = None) -> str:
    """The sbatch script exactly as submitit writes it for this point, or for a job array of
    `array` points shaped like it."""
    ex = make_executor(point, require_srun=False, array=array, job_name=job_name)
    if array > 1:  # as submitit's _internal_process_submissions sets it for a batch
        ex.parameters["map_count"] = array
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
def check(point: dict) -> None:
    if point.get("search") is not None:
        from launchers import slurm_search  # it imports this module
        slurm_search.check(point)
    cl = srun_step.cluster(point)
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


def dry_run_text(point: dict, script: bool = True) -> str:
    """What the point would run: its sbatch script (unless its array's is printed instead)
    and the srun line of every repeat."""
    job_min = srun_step.time_limit_min(point)
    out = [f"# ==== {point['point']}: one allocation of {point['nodes']} node(s) x "
           f"{point['gpus_per_node']} task(s); {point['repeats']} repeat(s), each an srun step"]
    if script:
        out += [f"# sbatch script (submitit writes it to {submitit_folder(point)}/<job>_submission.sh):",
                sbatch_script(point).rstrip("\n")]
    out += ["# step environment, added to the driver's (which drops stale RANK/WORLD_SIZE/... "
            "and per-step SLURM_* variables):"]
    adds = srun_step.step_env_additions(
        point, "<first host of `scontrol show hostnames $SLURM_JOB_NODELIST`>",
        srun_step.port_rule_text(point))
    adds["PYTHONPATH"] = f"{points.ROOT}:$PYTHONPATH"
    out += [f"#   {k}={v}" for k, v in adds.items()]
    for repeat in range(point["repeats"]):
        rdir = points.repeat_dir(point, repeat)
        try:
            argv = srun_step.srun_argv(point, os.path.join(rdir, layout.SPEC_FILE), rdir,
                                       sys.executable, job_min)
            line = shlex.join(argv)
        except points.WorkerUnavailable as exc:
            line = f"# not runnable: {exc}"
        out += [f"# repeat {repeat}:", line]
    return "\n".join(out)


def read_slurm_json(point_dir: str):
    try:
        with open(os.path.join(point_dir, layout.SLURM_FILE)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def recorded(point: dict) -> int:
    return sum(os.path.exists(os.path.join(points.repeat_dir(point, r), layout.RUN_FILE))
               for r in range(point["repeats"]))


def submit_search(point: dict, dry_run: bool = False) -> None:
    """One job for the whole search, its tries srun steps in it (launchers/slurm_search.py)."""
    from launchers import slurm_search  # it imports this module
    slurm_search.submit(point, dry_run)


def submit(point: dict, dry_run: bool = False) -> None:
    submit_all([point], dry_run=dry_run)


def shapes(pts: list) -> list:
    """The points grouped by allocation shape: the same sbatch options but for the job name
    (and the same submitit folder and requeue limit), in sweep order. Each group can be one
    job array."""
    groups = {}
    for p in pts:
        params = executor_parameters(p)
        del params["job_name"]
        key = json.dumps([submitit_folder(p), params, srun_step.launcher(p).get("max_requeues", 3)],
                         sort_keys=True, default=str)
        groups.setdefault(key, []).append(p)
    return list(groups.values())


def array_name(group: list) -> str:
    first = group[0]
    if len(group) == 1:
        return f"dlbench-{first['point']}"
    sweep = os.path.basename(layout.sweep_of(first["dir"]))
    return f"dlbench-{sweep}-{first['nodes']}x{first['gpus_per_node']}"


def dry_run_group(group: list) -> str:
    if len(group) == 1:
        return dry_run_text(group[0])
    first = group[0]
    head = [f"# ==== one job array of {len(group)} points, {first['point']} .. {group[-1]['point']} "
            "(one sbatch; each point its own array task, its own job id, requeue and cancel)",
            f"# sbatch script (submitit writes it to {submitit_folder(first)}/<job>_submission.sh):",
            sbatch_script(first, array=len(group), job_name=array_name(group)).rstrip("\n")]
    return "\n".join(head + [dry_run_text(p, script=False) for p in group])


def preflight(pts: list) -> None:
    """What submission needs, for every point, before any is written or queued."""
    for point in pts:
        if not srun_step.container_image(point):
            try:
                points.worker_argv(point, layout.SPEC_FILE, sys.executable)
            except points.WorkerUnavailable as exc:
                raise points.ConfigError(str(exc)) from None
    if shutil.which("sbatch") is None or shutil.which("srun") is None:
        raise points.ConfigError("launcher=slurm needs sbatch and srun on PATH (a Slurm login node)")


def _to_queue(pts: list) -> list:
    """[(point, its previous slurm.json or None, whether its folder is new)] of the points
    to submit, with their point.json written. A point whose earlier job is still pending or
    running is left to it (its driver reads this point.json): one squeue call for them all."""
    previous = {p["point"]: read_slurm_json(p["dir"]) for p in pts}
    ids = [prev["job_id"] for prev in previous.values() if prev]
    live = sacct.squeue_states(ids) if ids else {}
    out = []
    for point in pts:
        prev = previous[point["point"]]
        if prev and live.get(str(prev["job_id"])) in ("PENDING", "RUNNING"):
            print(f"{point['point']}: already queued as Slurm job {prev['job_id']}")
            continue
        fresh = not os.path.exists(os.path.join(point["dir"], layout.POINT_FILE))
        points.write_point(point)
        if recorded(point) == point["repeats"]:
            print(f"{point['point']}: every repeat is recorded; nothing to submit")
            continue
        out.append((point, prev, fresh))
    return out


def max_array() -> int:
    """How many tasks one job array may have (the controller's MaxArraySize)."""
    return slurm_nodes.slurm_config(keys=("MaxArraySize",)).get("MaxArraySize") or 1001


def _submit_group(group: list) -> None:
    """One sbatch for the group's points: a job array (a plain job for one point). Each
    point's job id (`123_4` in an array) and driver log go to its slurm.json."""
    first = group[0][0]
    executor = make_executor(first, array=len(group), job_name=array_name([g[0] for g in group]))
    try:
        with submission_environ():
            with executor.batch():
                jobs = [executor.submit(slurm_driver.PointDriver(p["dir"])) for p, _, _ in group]
    except Exception as exc:  # sbatch refused: say why in one line
        for p, _, fresh in group:
            if fresh:  # leave no point that looks submitted
                shutil.rmtree(p["dir"], ignore_errors=True)
        message = " ".join(str(exc).split())
        names = first["point"] + (f" and {len(group) - 1} more" if len(group) > 1 else "")
        raise points.ConfigError(f"sbatch refused {names}: {message[-400:]}") from None
    now = time.time()
    for (point, prev, _), job in zip(group, jobs):
        info = {"schema": layout.SLURM_SCHEMA, "version": layout.SCHEMA_VERSION,
                "point": point["point"], "job_id": str(job.job_id),
                "submitit_folder": submitit_folder(point), "log": str(job.paths.stdout),
                "submitted_unix": now, "time_min": srun_step.time_limit_min(point),
                "previous_jobs": ([prev["job_id"]] + prev.get("previous_jobs", [])) if prev else []}
        records.write_json_atomic(os.path.join(point["dir"], layout.SLURM_FILE), info)
        print(f"{point['point']}: queued as Slurm job {job.job_id}")


def submit_all(pts: list, dry_run: bool = False) -> None:
    """Queue the sweep's Slurm points (every one checked before): one sbatch per allocation
    shape, a job array of its points, at most MaxArraySize tasks each. `search=` points are
    submitted one by one (submit_search)."""
    searches = [p for p in pts if p.get("search") is not None]
    plain = [p for p in pts if p.get("search") is None]
    if dry_run:
        for group in shapes(plain):
            print(dry_run_group(group))
        for point in searches:
            submit_search(point, dry_run=True)
        return
    preflight(pts)
    todo = _to_queue(plain)
    size = max_array() if len(todo) > 1 else 1
    by_point = {id(t[0]): t for t in todo}
    for group in shapes([t[0] for t in todo]):
        for start in range(0, len(group), size):
            _submit_group([by_point[id(p)] for p in group[start:start + size]])
    for point in searches:
        submit_search(point)
