"""`python -m launch cancel SWEEP [--point GLOB]`: cancel what of a sweep is queued or running.

    python -m launch cancel outputs/2026-11-21_10-00-00
    python -m launch cancel outputs/2026-11-21_10-00-00 --point '*-4x8-*'

The points and searches are those of the sweep whose name matches `--point`, a shell-style
pattern; each is cancelled by the launcher whose record its folder holds
(launchers/backends/base.py `cancel`):

- Slurm (SWEEP/points/<p>/slurm.json: a plain job `123` or a job array task `123_4`; a
  search's tries share its one job: cancelling a try cancels the search): one squeue call
  finds which jobs are still queued or running, one `scancel` call cancels those. What Slurm
  does next is what it does on any scancel (docs/slurm.md): the running repeat is set aside,
  recorded repeats stay recorded, and submitting the sweep again runs only what is missing.
  Each cancelled point's slurm.json keeps `cancelled_unix`, so `launch status` shows it
  CANCELLED even once Slurm has forgotten the job.
- local (SWEEP/points/<p>/local.json: the launcher's pid): SIGINT to the launcher that runs the
  point, as Ctrl-C: it stops its ranks (SIGTERM, then SIGKILL), records the repeat
  `cancelled`, runs no other point and exits 130; `cancel` waits for it to end. The points are
  marked (`cancelled_unix`): `launch status` shows those not finished CANCELLED.

Exit status (docs/statuses.md): 0 when everything asked for is cancelled (or nothing was left
to cancel), 1 when some of it could not be (scancel refused a job; a local launcher did not
end), 2 on bad input (not a sweep, no point matching, no launcher's record, no scancel here).
"""
import argparse
import fnmatch
import sys

import launchers
from contract import exits
from launchers.commands import status
from launchers.suite import ConfigError


def folders(sweep: str, pattern: str) -> list:
    """The folders of the sweep's points and searches whose name matches `pattern`."""
    return [x["dir"] for x in status.read_searches(sweep) + status.read_points(sweep)
            if fnmatch.fnmatchcase(x["name"], pattern)]


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
    named = folders(args.sweep, args.point)
    owned = launchers.owners(named)
    if not owned:
        why = (f"has no launcher's record in its points' folders ({', '.join(launchers.RECORDS.values())}): "
               "a sweep of launcher=local older than local.json"
               if named else f"has no point matching {args.point!r}")
        print(f"error: {args.sweep} {why}; nothing to cancel", file=sys.stderr)
        return exits.REFUSED
    errors = []
    for name, fs in owned.items():
        try:
            done = launchers.get(name).cancel(args.sweep, fs)
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return exits.REFUSED
        print(done.said)
        errors += done.errors
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    return exits.FAILED if errors else exits.OK
