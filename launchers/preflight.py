"""preflight=true: the health checks in a point's allocation before its first repeat
(docs/health.md, "Preflight").

On Slurm the driver (launchers/slurm_driver.py) runs one health step (launchers/health_step.py)
in each allocation it gets while repeats are unrecorded. All healthy: the repeats run there.
A node sick, or the sending end of a slow link (launchers/health_verdict.py, `exclude`): the
driver gives the allocation back and the point is submitted again with every node left out
so far excluded (submitit's `exclude`: sbatch --exclude), at most health.retries times. A
point that cannot find enough healthy nodes (the retries spent, or fewer usable nodes in
its partition than it needs once the sick are left out) ends `unhealthy`: no repeat runs,
and `launch status` and the report say which nodes were left out and why.

Locally (launchers/local.py) the node checks that apply run here and the rest say they are
skipped; a sick node cannot be left out, so the point ends `unhealthy`.

SWEEP/points/<p>/preflight.json (paths.PREFLIGHT_FILE) keeps each attempt (its job, nodes,
verdict and folder, paths.health_attempt_dir), the nodes left out and why, the
resubmissions and the outcome: "ok", "resubmitted" or "unhealthy" (with its error). A
submission of the sweep by hand starts a new round; the earlier ones stay in `rounds`.
"""
import os
import time

from contract import paths, records, statuses
from launchers import health_step, health_verdict, points, slurm_nodes, slurm_job


def read(point_dir: str):
    return records.read_json(os.path.join(point_dir, paths.PREFLIGHT_FILE))


def _fresh(point: dict) -> dict:
    return {"schema": paths.PREFLIGHT_SCHEMA, "version": paths.SCHEMA_VERSION,
            "point": point.get("point"), "attempts": [], "excluded": {}, "resubmissions": 0,
            "outcome": None, "error": None, "rounds": []}


def _write(point_dir: str, state: dict) -> None:
    records.write_json_atomic(os.path.join(point_dir, paths.PREFLIGHT_FILE), state)


def new_round(point_dir: str) -> None:
    """A submission by hand: what earlier rounds left out no longer holds (nodes get fixed)."""
    state = read(point_dir)
    if state and state.get("attempts"):
        keep = {k: state.get(k) for k in ("attempts", "excluded", "resubmissions", "outcome", "error")}
        state.update(rounds=state.get("rounds", []) + [keep], attempts=[], excluded={},
                     resubmissions=0, outcome=None, error=None)
        _write(point_dir, state)


def _all_attempts(state: dict) -> int:
    return len(state["attempts"]) + sum(len(r.get("attempts") or []) for r in state.get("rounds") or [])


def _attempt(point: dict, state: dict, run, where: dict) -> dict:
    """One health step (`run(hdir) -> verdict`), recorded in the state."""
    n = _all_attempts(state)
    hdir = paths.health_attempt_dir(point["dir"], n)
    verdict = run(hdir)
    state["attempts"].append({**where, "attempt": n, "dir": os.path.relpath(hdir, point["dir"]),
                              "ok": verdict["ok"], "sick": verdict["sick"],
                              "slow_links": verdict["slow_links"], "exclude": verdict["exclude"],
                              "ended_unix": time.time()})
    return verdict


def _unhealthy(point: dict, state: dict, why: str, log) -> bool:
    state.update(outcome=statuses.UNHEALTHY, error=why)
    _write(point["dir"], state)
    log(f"{point['point']}: {statuses.UNHEALTHY}: {why}")
    return False


def left_out(state: dict) -> str:
    """The nodes left out and why, in one line."""
    return "; ".join(f"{node} ({', '.join(why)})" for node, why in sorted(state["excluded"].items()))


def usable_nodes(partition) -> set:
    """The partition's nodes Slurm would give a job (not down, drained or failing)."""
    return {n for n, state in slurm_nodes.partition_nodes(partition).items()
            if not state.startswith(("down", "drain", "fail", "maint")) and not state.endswith("*")}


def on_slurm(drv, log) -> bool:
    """The driver's preflight (`drv`: the PointDriver in its allocation). True: run the
    repeats here. False: this allocation is done with (resubmitted, or unhealthy)."""
    point = points.read_point(drv.point_dir)
    if not point.get("preflight") or points.recorded(point) == point["repeats"]:
        return True
    state = read(point["dir"]) or _fresh(point)
    verdict = _attempt(point, state, lambda hdir: health_step.run_slurm(
        point, hdir, drv.hosts, drv.job_id, drv.job_number, log),
        {"job_id": drv.job_id, "nodes": drv.hosts})
    log("preflight:\n" + health_verdict.render(verdict))
    if not verdict["recorded_ranks"]:  # the step itself did not run: no node to blame
        where = os.path.join(state["attempts"][-1]["dir"], paths.SRUN_LOG)
        return _unhealthy(point, state, f"the health step left no record on any node (see {where}; "
                          f"{verdict.get('ended_by') or 'no cause known'})", log)
    if verdict["ok"]:
        state.update(outcome="ok", error=None)
        _write(point["dir"], state)
        return True
    state["excluded"].update(verdict["exclude"])
    retries = int(point["health"]["retries"])
    if state["resubmissions"] >= retries:
        return _unhealthy(point, state, f"still sick after {retries} resubmission(s): "
                          f"{left_out(state)}", log)
    partition = (point.get("cluster") or {}).get("partition") or os.environ.get("SLURM_JOB_PARTITION")
    usable = usable_nodes(partition) - set(state["excluded"])
    if len(usable) < point["nodes"]:
        gone = len(state["excluded"])
        return _unhealthy(point, state, f"needs {point['nodes']} healthy node(s); partition "
                          f"{partition} has {len(usable)} once {left_out(state)} "
                          f"{'is' if gone == 1 else 'are'} left out", log)
    try:
        slurm_job.submit_group([(point, slurm_job.read_slurm_json(point["dir"]), False)],
                               lambda p: type(drv)(p["dir"]), exclude=sorted(state["excluded"]))
    except points.ConfigError as exc:  # sbatch refused the exclusion: no node left to run on
        return _unhealthy(point, state, f"{exc}; left out: {left_out(state)}", log)
    state["resubmissions"] += 1
    state.update(outcome="resubmitted", error=None,
                 job_id=(slurm_job.read_slurm_json(point["dir"]) or {}).get("job_id"))
    _write(point["dir"], state)
    log(f"preflight: {point['point']} resubmitted as job {state['job_id']} without "
        f"{', '.join(sorted(state['excluded']))}; this allocation is given back")
    return False


def on_local(point: dict, run) -> bool:
    """The local launcher's preflight: the node checks here (`run(hdir) -> verdict`, the
    local launcher's health step). True: run the repeats."""
    if not point.get("preflight") or points.recorded(point) == point["repeats"]:
        return True
    state = read(point["dir"]) or _fresh(point)
    verdict = _attempt(point, state, run,
                       {"job_id": None, "nodes": [os.uname().nodename]})
    print(f"{point['point']}: preflight\n{health_verdict.render(verdict)}")
    if verdict["ok"]:
        state.update(outcome="ok", error=None)
        _write(point["dir"], state)
        return True
    state["excluded"].update(verdict["exclude"])
    return _unhealthy(point, state, f"this machine is sick and the local launcher has no other "
                      f"node: {left_out(state)}", print)

