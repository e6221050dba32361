"""preflight=true: the health checks in a point's allocation before its first repeat
(docs/health.md, "Preflight").

The repeat loop (launchers/driver/repeats.py) calls `passes(point, launcher)` in each allocation it
gets while repeats are unrecorded, with the backend's launcher object in that allocation:
one health step (`launcher.health_step`, launchers/health/step.py). All healthy: the
repeats run there. A node sick, or the sending end of a slow link
(launchers/health/verdict.py): the launcher queues the point again without every node the
round's attempts leave out together (launchers/health/evidence.py: a slow link of 2 nodes is
pinned on its end once another attempt has paired each end with someone else, and a node
left out on a guess is let back in when that clears it; `launcher.resubmit_without`: on
Slurm submitit's `exclude`, sbatch --exclude, at most health.retries times, and the
allocation is given back). A point that
cannot find enough healthy nodes (the retries spent, fewer usable nodes in its partition
than it needs once the sick are left out, or a local machine that is sick: it has no other)
ends `unhealthy`: no repeat runs, and `launch status` and the report say which nodes were
left out and why.

SWEEP/points/<p>/preflight.json (paths.PREFLIGHT_FILE) keeps each attempt (its job, nodes,
verdict, links and folder, paths.health_attempt_dir), the nodes left out and why, those let
back in and why, the resubmissions and the outcome: "ok", "resubmitted" or "unhealthy" (with
its error). A submission of the sweep by hand starts a new round; the earlier ones stay in
`rounds`.
"""
import os
import time

from contract import paths, records, statuses
from launchers import sweepdir
from launchers.health import evidence
from launchers.health import verdict as health_verdict


class Unhealthy(Exception):
    """Too few healthy nodes for the point, said in one line: it ends `unhealthy`."""


def read(point_dir: str):
    return records.read_json(os.path.join(point_dir, paths.PREFLIGHT_FILE))


def _fresh(point) -> dict:
    return {"schema": paths.PREFLIGHT_SCHEMA, "version": paths.SCHEMA_VERSION,
            "point": point.name, "attempts": [], "excluded": {}, "readmitted": {},
            "resubmissions": 0, "outcome": None, "error": None, "rounds": []}


def _write(point_dir: str, state: dict) -> None:
    records.write_json_atomic(os.path.join(point_dir, paths.PREFLIGHT_FILE), state)


def new_round(point_dir: str) -> None:
    """A submission by hand: what earlier rounds left out no longer holds (nodes get fixed)."""
    state = read(point_dir)
    if state and state.get("attempts"):
        keep = {k: state.get(k) for k in ("attempts", "excluded", "readmitted", "resubmissions",
                                          "outcome", "error")}
        state.update(rounds=state.get("rounds", []) + [keep], attempts=[], excluded={},
                     readmitted={}, resubmissions=0, outcome=None, error=None)
        _write(point_dir, state)


def _all_attempts(state: dict) -> int:
    return len(state["attempts"]) + sum(len(r.get("attempts") or []) for r in state.get("rounds") or [])


def _attempt(point, state: dict, launcher) -> dict:
    """One health step in `launcher`'s allocation, recorded in the state."""
    n = _all_attempts(state)
    hdir = paths.health_attempt_dir(point.dir, n)
    verdict = launcher.health_step(point, hdir)
    state["attempts"].append({**launcher.where(), "attempt": n, "dir": os.path.relpath(hdir, point.dir),
                              "ok": verdict["ok"], "sick": verdict["sick"],
                              "slow_links": verdict["slow_links"], "exclude": verdict["exclude"],
                              # every link measured, [src, dst, GB/s, slow]: the evidence
                              "links": [[link["src"], link["dst"], link["gbytes_s"], link["slow"]]
                                        for link in verdict["links"]],
                              "network_flags": verdict.get("network_flags") or [],
                              "ended_unix": time.time()})
    return verdict


def _unhealthy(point, state: dict, why: str, log) -> bool:
    state.update(outcome=statuses.UNHEALTHY, error=why)
    _write(point.dir, state)
    log(f"{point.name}: {statuses.UNHEALTHY}: {why}")
    return False


def _leave_out(state: dict, log) -> None:
    """The nodes this round's attempts leave out together; one left out before that they now
    clear is let back in, saying why."""
    before, readmitted = state["excluded"], state.setdefault("readmitted", {})
    state["excluded"] = evidence.left_out(state["attempts"])
    for node in state["excluded"]:
        readmitted.pop(node, None)
    for node in sorted(set(before) - set(state["excluded"])):
        why = (f"left out before ({'; '.join(before[node])}); attempt "
               f"{state['attempts'][-1]['attempt']} puts the slow links on "
               f"{', '.join(sorted(state['excluded']))}")
        readmitted[node] = why
        log(f"preflight: {node} let back in: {why}")


def left_out(state: dict) -> str:
    """The nodes left out and why, in one line."""
    return "; ".join(f"{node} ({', '.join(why)})" for node, why in sorted(state["excluded"].items()))


def passes(point, launcher, log=print) -> bool:
    """The point's preflight in `launcher`'s allocation. True: run the repeats here. False:
    this allocation is done with (the point resubmitted, or unhealthy)."""
    if not point.preflight or sweepdir.recorded(point) == point.repeats:
        return True
    state = read(point.dir) or _fresh(point)
    verdict = _attempt(point, state, launcher)
    log(f"{point.name}: preflight\n" + health_verdict.render(verdict))
    if not verdict["recorded_ranks"]:  # the step itself did not run: no node to blame
        where = os.path.join(state["attempts"][-1]["dir"], paths.SRUN_LOG)
        return _unhealthy(point, state, f"the health step left no record on any node (see {where}; "
                          f"{verdict.get('ended_by') or 'no cause known'})", log)
    if verdict["ok"]:
        state.update(outcome="ok", error=None)
        _write(point.dir, state)
        return True
    _leave_out(state, log)
    try:
        job_id = launcher.resubmit_without(point, state)
    except Unhealthy as exc:
        return _unhealthy(point, state, str(exc), log)
    state["resubmissions"] += 1
    state.update(outcome="resubmitted", error=None, job_id=job_id)
    _write(point.dir, state)
    log(f"preflight: {point.name} resubmitted as job {state['job_id']} without "
        f"{', '.join(sorted(state['excluded']))}; this allocation is given back")
    return False
