"""A sweep's Slurm jobs seen and cancelled from the submitting host: what `launch status` and
`launch cancel` get of the Slurm launcher (launchers/backends/base.py, `live` and `cancel`).

Each point's (and search's) job is in its folder's slurm.json (a plain job `123` or a job
array task `123_4`; a search's tries name the search's one job). Every call asks about
every job at once (sacct.py): one squeue and at most one sacct for `live`; one squeue and one
`scancel` (an argument list) for `cancel`. A cancelled point's slurm.json keeps
`cancelled_unix`, so that it reads CANCELLED once Slurm has forgotten its job.
"""
import os
import re
import shutil
import subprocess
import time

from contract import paths, records
from launchers.backends.base import Cancelled, Live
from launchers.backends.slurm import sacct
from launchers.suite import ConfigError

# scancel's words for a job that ended between our squeue and its call: nothing to do.
GONE = ("already completing or completed", "Invalid job id specified")


def _record(folder: str):
    rec = records.read_json(os.path.join(folder, paths.SLURM_FILE))
    return rec if isinstance(rec, dict) else None


def live_of(rec: dict, info: dict) -> Live:
    """One folder's Live from its slurm.json and its job's {state, reason} as sacct.jobs
    gives it. A pending job `launch cancel` cancelled is CANCELLED: scancel returned, and a
    loaded controller may list it pending a moment longer (a running one is shown running
    until it has ended)."""
    job = str(rec.get("job_id") or "") or "-"
    state, reason = info.get("state"), info.get("reason")
    if rec.get("cancelled_unix") and state == "PENDING":
        state, reason = "CANCELLED", None
    return Live(job, state, reason, cancelled=bool(rec.get("cancelled_unix")), log=rec.get("log"),
                gone=f"Slurm no longer knows job {rec.get('job_id')}")


def live(folders: list) -> tuple:
    recs = {f: r for f, r in ((f, _record(f)) for f in folders) if r is not None}
    ids = sorted({str(r["job_id"]) for r in recs.values() if r.get("job_id")})
    jobs = sacct.jobs(ids) if ids else {}
    out = {f: live_of(r, jobs.get(str(r.get("job_id") or "")) or {}) for f, r in recs.items()}
    note = None
    if ids and all(out[f].state is None for f in out if out[f].job != "-"):
        note = (f"neither squeue nor sacct knows any of the sweep's {len(ids)} Slurm job(s): "
                "states come from the records alone (is SLURM_CONF set, does the controller "
                "answer?)")
    return out, note


def scancel(job_ids: list, timeout: float = 60) -> tuple:
    """Cancel the jobs in one call -> (the jobs it did not cancel, its complaints that
    matter: none when every job is cancelled or had just ended by itself)."""
    try:
        r = subprocess.run(["scancel", *job_ids], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as exc:
        return set(job_ids), [str(exc)]
    lines = [line.strip() for line in (r.stderr + r.stdout).splitlines() if line.strip()]
    if r.returncode and not lines:
        return set(job_ids), [f"scancel exited {r.returncode}"]
    missed = {j for j in job_ids if any(re.search(rf"\b{re.escape(j)}\b", line) for line in lines)}
    return missed, [line for line in lines if not any(g in line for g in GONE)]


def cancel(sweep: str, folders: list) -> Cancelled:
    """The folders' jobs still queued or running (one squeue), cancelled by one scancel; each
    cancelled job's slurm.json files marked."""
    jobs: dict = {}  # job id -> the slurm.json files naming it
    for f in folders:
        job = str((_record(f) or {}).get("job_id") or "")
        if job:
            jobs.setdefault(job, []).append(os.path.join(f, paths.SLURM_FILE))
    if shutil.which("scancel") is None:
        raise ConfigError("launch cancel needs scancel on PATH (a Slurm login node)")
    queued = sorted(j for j, st in sacct.squeue_states(list(jobs)).items()
                    if st in ("PENDING", "RUNNING"))
    ended = len(jobs) - len(queued)
    if not queued:
        return Cancelled(f"nothing to cancel: squeue has none of the {len(jobs)} job(s) of {sweep} "
                         "queued or running")
    when = time.time()
    missed, refused = scancel(queued)
    for job in set(queued) - missed:
        for path in jobs[job]:
            records.update_json(path, cancelled_unix=when)
    return Cancelled(f"cancelled {len(queued) - len(missed)} job(s) of {sweep}"
                     + (f"; {ended} had already ended" if ended else "")
                     + f"; recorded repeats are kept. Follow: python -m launch status {sweep}",
                     (f"scancel: {'; '.join(refused)[:400]}",) if refused else ())
