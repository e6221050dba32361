"""The driver: runs once per allocation and runs a point's repeats, each with fresh ranks.

How ranks start is the launcher's business (processes here, `srun` on Slurm);
what a repeat is, when it counts as done, and how its status is decided live
here, once. A repeat is done when its run.json exists: a rerun or a requeued
allocation skips it, so nothing is counted twice, and a repeat interrupted
half-way is moved aside whole and run again.
"""
import json
import os
import time

from frameworks.common import records
from launchers import points


def read_rank_records(rdir: str, world_size: int) -> dict:
    """rank -> record, None where a rank wrote none (or one that cannot be read)."""
    out = {}
    for rank in range(world_size):
        try:
            with open(os.path.join(rdir, records.record_name(rank))) as f:
                out[rank] = json.load(f)
        except (OSError, ValueError):
            out[rank] = None
    return out


def _set_aside(rdir: str) -> None:
    """Keep an interrupted attempt's files, out of the way of the analysis."""
    if os.path.isdir(rdir) and os.listdir(rdir):
        os.rename(rdir, f"{rdir}.interrupted-{time.time():.0f}")
    os.makedirs(rdir, exist_ok=True)


def run_repeat(point: dict, repeat: int, start) -> dict:
    """Run one repeat with `start(point, spec_path, rdir) -> (exit_codes, ended_by)`."""
    rdir = points.repeat_dir(point, repeat)
    _set_aside(rdir)
    spec_path = os.path.join(rdir, "spec.json")
    records.write_json_atomic(spec_path, points.run_spec(point, repeat))
    started = time.time()
    try:
        exit_codes, ended_by = start(point, spec_path, rdir)
        status, error = records.run_status(read_rank_records(rdir, point["world_size"]),
                                           point["world_size"], ended_by)
    except points.WorkerUnavailable as exc:
        exit_codes, status, error = [], "failed", str(exc)
    run = {"schema": records.RUN_SCHEMA, "version": records.SCHEMA_VERSION,
           "point": point["point"], "repeat": repeat, "status": status, "error": error,
           "world_size": point["world_size"], "exit_codes": exit_codes,
           "started_unix": started, "ended_unix": time.time()}
    records.write_json_atomic(os.path.join(rdir, "run.json"), run)
    return run


def run_point(point_dir: str, start, log=print) -> list:
    """Run every repeat of the point not yet recorded; return the statuses of all."""
    point = points.read_point(point_dir)
    statuses = []
    for repeat in range(point["repeats"]):
        done = os.path.join(points.repeat_dir(point, repeat), "run.json")
        if os.path.exists(done):
            with open(done) as f:
                run = json.load(f)
            log(f"{point['point']} repeat {repeat}: already recorded ({run['status']})")
        else:
            run = run_repeat(point, repeat, start)
            detail = f" ({run['error']})" if run["error"] else ""
            log(f"{point['point']} repeat {repeat}: {run['status']}{detail}")
        statuses.append(run["status"])
    return statuses
