"""The repeat loop: runs once per allocation (here, or the Slurm driver in its allocation)
and runs a point's repeats, each with fresh ranks, after its preflight where it asks for one.

How ranks start is the launcher object's business (`launcher.start_repeat`: processes here,
an `srun` step on Slurm); what a repeat is, when it counts as done, and how its status is
decided live here, once. A repeat is done when its run.json exists and is final
(contract/statuses.py `final`: not `cancelled`): a rerun or a requeued allocation skips it,
so nothing is counted twice; a repeat interrupted half-way, or cancelled, is moved aside
whole and run again. A stop signal to the launcher (launchers/backends/stopping.py) ends
the loop: the repeat it cut short is recorded `cancelled` with the signal as its cause,
and no other starts.
"""
import os
import shutil
import time

from contract import paths, records, statuses
from launchers import sweepdir
from launchers.backends import stopping
from launchers.backends.worker import WorkerUnavailable
from launchers.driver import preflight, progress, run_spec


def set_aside(rdir: str) -> None:
    """Move an interrupted attempt out of the analysis' way, whole (the layout's
    interrupted name: kept, never read); a repeat that never started (nothing, or only
    its spec) is simply removed."""
    if not os.path.isdir(rdir):
        return
    if sorted(os.listdir(rdir)) in ([], [paths.SPEC_FILE]):
        shutil.rmtree(rdir, ignore_errors=True)
    else:
        os.rename(rdir, paths.interrupted_dir(rdir))


def _fresh(rdir: str) -> None:
    """An empty folder for a repeat about to run; an earlier attempt's is set aside."""
    set_aside(rdir)
    os.makedirs(rdir, exist_ok=True)


def log_tail(rdir: str, rank: int) -> list:
    """The last lines of a rank's log (stdout and stderr), for a repeat's error."""
    try:
        with open(os.path.join(rdir, paths.rank_log_name(rank)), errors="replace") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))  # the tail only, however long the log
            return statuses.tail(f.read())
    except OSError:
        return []


def run_repeat(point, repeat: int, launcher) -> dict:
    """Run one repeat with `launcher.start_repeat(point, spec_path, rdir) -> (rank_ends,
    ended_by)`, where rank_ends maps rank -> {exit_code, signal, node, stopped}
    (statuses.run_outcome)."""
    rdir = point.repeat_dir(repeat)
    _fresh(rdir)
    spec_path = sweepdir.write_spec(rdir, run_spec.of(point, repeat))
    started = time.time()
    world = point.world_size
    rank_ends, cause, lost, stopped_by = {}, None, [], None
    try:
        rank_ends, ended_by = launcher.start_repeat(point, spec_path, rdir)
        if ended_by == "cancelled":  # the launcher's stop signal
            stopped_by = stopping.received()
        out = statuses.run_outcome(sweepdir.read_rank_records(rdir, world), world, ended_by, rank_ends,
                                   why=stopping.cause() if stopped_by else None)
        status, error, cause, lost = out["status"], out["error"], out["cause"], out["lost"]
    except WorkerUnavailable as exc:
        status, error = "failed", str(exc)
    # The log of the rank that named the status, else of the first that left no record.
    tail_rank = cause if cause is not None else (lost[0] if lost else None)
    run = {"schema": paths.RUN_SCHEMA, "version": paths.SCHEMA_VERSION,
           "point": point.name, "repeat": repeat, "status": status, "error": error,
           "world_size": world,
           "exit_codes": [rank_ends.get(r, {}).get("exit_code") for r in range(world)],
           "rank_ends": {str(r): e for r, e in sorted(rank_ends.items())
                         if r in lost or e.get("exit_code") or e.get("signal")},
           "cause_rank": cause, "lost_ranks": lost,
           "log_tail": {"rank": tail_rank, "lines": log_tail(rdir, tail_rank)}
           if status != "ok" and tail_rank is not None else None,
           "started_unix": started, "ended_unix": time.time()}
    if stopped_by:
        run["stopped_by"] = stopped_by
    records.write_json_atomic(os.path.join(rdir, paths.RUN_FILE), run)
    return run


def _not_run(point, repeat: int, because: dict) -> dict:
    """A repeat not run because an earlier one found the point unsupported here: a missing
    capability does not come back on the next try, so the point ends in seconds."""
    rdir = point.repeat_dir(repeat)
    _fresh(rdir)
    now = time.time()
    run = {"schema": paths.RUN_SCHEMA, "version": paths.SCHEMA_VERSION,
           "point": point.name, "repeat": repeat, "status": "unsupported",
           "error": f"{because['error']} (not run: repeat {because['repeat']} found it unsupported)",
           "world_size": point.world_size, "exit_codes": [], "rank_ends": {},
           "cause_rank": None, "lost_ranks": [], "log_tail": None, "not_run": True,
           "started_unix": now, "ended_unix": now}
    records.write_json_atomic(os.path.join(rdir, paths.RUN_FILE), run)
    return run


def run_point(point_dir: str, launcher, log=print):
    """Run every repeat of the point not yet recorded, with `launcher` (the backend's object,
    in its allocation), once the point's preflight passes (launchers/driver/preflight.py);
    return the statuses of all, or None when the preflight gave the allocation up."""
    point = sweepdir.read_point(point_dir)
    if not preflight.passes(point, launcher, log):
        return None
    ended, unsupported = [], None
    for repeat in range(point.repeats):
        run = sweepdir.read_run(point.repeat_dir(repeat))
        if run is not None and statuses.final(run):
            log(f"{point.name} repeat {repeat}: already recorded ({run['status']})")
        elif unsupported:
            run = _not_run(point, repeat, unsupported)
            log(f"{point.name} repeat {repeat}: unsupported (not run)")
        else:
            stopping.check()
            if run is not None:
                log(f"{point.name} repeat {repeat}: {run['status']} before ({run['error']}); "
                    "running it again")
            with progress.shown(point, repeat, log):  # rank 0's heartbeat, as it comes
                run = run_repeat(point, repeat, launcher)
            detail = f" ({run['error']})" if run["error"] else ""
            log(f"{point.name} repeat {repeat}: {run['status']}{detail}")
            stopping.check()
        if run["status"] == "unsupported" and not unsupported:
            unsupported = run
        ended.append(run["status"])
    return ended
