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
The batch job itself (sbatch options, submitit's executor, the job's record) is built by
launchers/slurm_job.py, which a search's submission (launchers/slurm_search.py) shares.

Requeue: the job is `--requeue`able and the driver is a submitit Checkpointable; a
requeued allocation runs the driver again, which skips every repeat whose run.json exists.
"""
import json
import os
import shlex
import sys

from contract import paths
from launchers import (health_step, points, preflight, sacct, slurm_driver, slurm_job, slurm_nodes,
                       slurm_search, srun_step)


# ---- the launcher interface ---------------------------------------------------------------
def check(point: dict) -> None:
    if point.get("search") is not None:
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
        out += [f"# sbatch script (submitit writes it to {slurm_job.submitit_folder(point)}/<job>_submission.sh):",
                slurm_job.sbatch_script(point).rstrip("\n")]
    out += ["# step environment, added to the driver's (which drops stale RANK/WORLD_SIZE/... "
            "and per-step SLURM_* variables):"]
    adds = srun_step.step_env_additions(
        point, "<first host of `scontrol show hostnames $SLURM_JOB_NODELIST`>",
        srun_step.port_rule_text(point))
    adds["PYTHONPATH"] = f"{points.ROOT}:$PYTHONPATH"
    out += [f"#   {k}={v}" for k, v in adds.items()]
    if point.get("preflight"):
        hdir = paths.health_attempt_dir(point["dir"], 0)
        spec = os.path.join(hdir, paths.SPEC_FILE)
        out += ["# preflight=true: first the health checks, one step (docs/health.md):",
                shlex.join(health_step.srun_argv(point, spec, hdir))]
    for repeat in range(point["repeats"]):
        rdir = points.repeat_dir(point, repeat)
        try:
            argv = srun_step.srun_argv(point, os.path.join(rdir, paths.SPEC_FILE), rdir,
                                       sys.executable, job_min)
            line = shlex.join(argv)
        except points.WorkerUnavailable as exc:
            line = f"# not runnable: {exc}"
        out += [f"# repeat {repeat}:", line]
    return "\n".join(out)


def submit_search(point: dict, dry_run: bool = False) -> None:
    """One job for the whole search, its tries srun steps in it (launchers/slurm_search.py)."""
    slurm_search.submit(point, dry_run)


def submit(point: dict, dry_run: bool = False) -> None:
    submit_all([point], dry_run=dry_run)


def shapes(pts: list) -> list:
    """The points grouped by allocation shape: the same sbatch options but for the job name
    (and the same submitit folder and requeue limit), in sweep order. Each group can be one
    job array."""
    groups = {}
    for p in pts:
        params = slurm_job.executor_parameters(p)
        del params["job_name"]
        key = json.dumps([slurm_job.submitit_folder(p), params, srun_step.launcher(p).get("max_requeues", 3)],
                         sort_keys=True, default=str)
        groups.setdefault(key, []).append(p)
    return list(groups.values())


def array_name(group: list) -> str:
    first = group[0]
    if len(group) == 1:
        return f"dlbench-{first['point']}"
    sweep = os.path.basename(paths.sweep_of(first["dir"]))
    return f"dlbench-{sweep}-{first['nodes']}x{first['gpus_per_node']}"


def dry_run_group(group: list) -> str:
    if len(group) == 1:
        return dry_run_text(group[0])
    first = group[0]
    head = [f"# ==== one job array of {len(group)} points, {first['point']} .. {group[-1]['point']} "
            "(one sbatch; each point its own array task, its own job id, requeue and cancel)",
            f"# sbatch script (submitit writes it to {slurm_job.submitit_folder(first)}/<job>_submission.sh):",
            slurm_job.sbatch_script(first, array=len(group), job_name=array_name(group)).rstrip("\n")]
    return "\n".join(head + [dry_run_text(p, script=False) for p in group])


def _to_queue(pts: list) -> list:
    """[(point, its previous slurm.json or None, whether its folder is new)] of the points
    to submit, with their point.json written. A point whose earlier job is still pending or
    running is left to it (its driver reads this point.json): one squeue call for them all."""
    previous = {p["point"]: slurm_job.read_slurm_json(p["dir"]) for p in pts}
    ids = [prev["job_id"] for prev in previous.values() if prev]
    live = sacct.squeue_states(ids) if ids else {}
    out = []
    for point in pts:
        prev = previous[point["point"]]
        if prev and live.get(str(prev["job_id"])) in ("PENDING", "RUNNING"):
            print(f"{point['point']}: already queued as Slurm job {prev['job_id']}")
            continue
        fresh = not os.path.exists(os.path.join(point["dir"], paths.POINT_FILE))
        points.write_point(point)
        preflight.new_round(point["dir"])  # exclusions of an earlier submission do not carry over
        if points.recorded(point) == point["repeats"]:
            print(f"{point['point']}: every repeat is recorded; nothing to submit")
            continue
        out.append((point, prev, fresh))
    return out


def max_array() -> int:
    """How many tasks one job array may have (the controller's MaxArraySize)."""
    return slurm_nodes.slurm_config(keys=("MaxArraySize",)).get("MaxArraySize") or 1001


def _submit_group(group: list) -> None:
    """One sbatch for the group's points: a job array (a plain job for one point), each task
    the point's driver (launchers/slurm_job.py)."""
    slurm_job.submit_group(group, lambda p: slurm_driver.PointDriver(p["dir"]),
                           job_name=array_name([g[0] for g in group]))


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
    slurm_job.preflight(pts)
    todo = _to_queue(plain)
    size = max_array() if len(todo) > 1 else 1
    by_point = {id(t[0]): t for t in todo}
    for group in shapes([t[0] for t in todo]):
        for start in range(0, len(group), size):
            _submit_group([by_point[id(p)] for p in group[start:start + size]])
    for point in searches:
        submit_search(point)
