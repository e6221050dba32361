"""`python -m launch cancel SWEEP [--point GLOB]`: cancel a sweep's Slurm jobs.

    python -m launch cancel outputs/2026-11-21_10-00-00
    python -m launch cancel outputs/2026-11-21_10-00-00 --point '*-4x8-*'

The jobs are those the sweep's points and searches name (SWEEP/points/<p>/slurm.json: a
plain job `123` or a job array task `123_4`); `--point` keeps those whose name matches a
shell-style pattern (a search's tries share its one job: cancelling a try cancels the
search). One squeue call finds which of them are still queued or running, one `scancel`
call (an argument list) cancels those. What Slurm does next is what it does on any
scancel (docs/slurm.md): the running repeat is set aside, recorded repeats stay recorded,
and submitting the sweep again runs only what is missing. Each cancelled point's
slurm.json keeps `cancelled_unix`, so `launch status` shows it CANCELLED even once Slurm
has forgotten the job.

Exit status (docs/statuses.md): 0 when every job asked for is cancelled (or none was left to
cancel), 1 when scancel refused one, 2 on bad input (not a sweep, no point matching, no Slurm
here).
"""
import argparse
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import time

from contract import exits, paths, records
from launchers.backends.slurm import sacct
from launchers.commands import status

# scancel's words for a job that ended between our squeue and its call: nothing to do.
GONE = ("already completing or completed", "Invalid job id specified")


def owners(sweep: str, pattern: str) -> dict:
    """job id -> the slurm.json files naming it, for the points and searches of the sweep
    whose name matches `pattern`."""
    jobs: dict = {}
    for x in status.read_points(sweep) + status.read_searches(sweep):
        job = str((x["slurm"] or {}).get("job_id") or "")
        if job and fnmatch.fnmatchcase(x["name"], pattern):
            jobs.setdefault(job, []).append(
                os.path.join(paths.point_dir(sweep, x["name"]), paths.SLURM_FILE))
    return jobs


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


def mark_cancelled(path: str, when: float) -> None:
    rec = status._json(path)
    if isinstance(rec, dict):
        records.write_json_atomic(path, dict(rec, cancelled_unix=when))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m launch cancel", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep", help=f"the sweep folder ({status.POINT_FILES})")
    parser.add_argument("--point", default="*", metavar="GLOB",
                        help="only the points (or searches) whose name matches, e.g. '*-2x8-*'")
    args = parser.parse_args(argv)
    if not status.is_sweep(args.sweep):
        print(f"error: {args.sweep} is not a sweep: no {status.POINT_FILES} under it", file=sys.stderr)
        return exits.REFUSED
    jobs = owners(args.sweep, args.point)
    if not jobs:
        named = [x["name"] for x in status.read_points(args.sweep) + status.read_searches(args.sweep)
                 if fnmatch.fnmatchcase(x["name"], args.point)]
        why = ("has no Slurm job: it ran with launcher=local, which runs synchronously"
               if named else f"has no point matching {args.point!r}")
        print(f"error: {args.sweep} {why}; nothing to cancel", file=sys.stderr)
        return exits.REFUSED
    if shutil.which("scancel") is None:
        print("error: launch cancel needs scancel on PATH (a Slurm login node)", file=sys.stderr)
        return exits.REFUSED
    live = sorted(j for j, st in sacct.squeue_states(list(jobs)).items()
                  if st in ("PENDING", "RUNNING"))
    ended = len(jobs) - len(live)
    if not live:
        print(f"nothing to cancel: squeue has none of the {len(jobs)} job(s) of {args.sweep} "
              "queued or running")
        return exits.OK
    when = time.time()
    missed, refused = scancel(live)
    for job in set(live) - missed:
        for path in jobs[job]:
            mark_cancelled(path, when)
    print(f"cancelled {len(live) - len(missed)} job(s) of {args.sweep}"
          + (f"; {ended} had already ended" if ended else "")
          + f"; recorded repeats are kept. Follow: python -m launch status {args.sweep}")
    if refused:
        print(f"error: scancel: {'; '.join(refused)[:400]}", file=sys.stderr)
        return exits.FAILED
    return exits.OK
