"""A sweep as launch.py runs it: every point made and checked before any of them runs or is
queued, then each launcher gets all of its points at once (the Slurm launcher submits the
points of one allocation shape as one job array).

    run(jobs)    jobs: [Job(cfg, sweep_dir, num, overrides)], cfg without its hydra node
                 (make_points, then submit: a certification makes every item's points first)
    main(jobs)   the same for launch.py: bad input is one line on stderr and exit status 2;
                 what it handed to launchers is kept in `ran`, whose outcome is launch.py's
                 exit status (launchers/commands/outcome.py, contract/exits.py)

One impossible point refuses the whole sweep: ConfigError, in one line, naming the
point, and nothing has run; a point that an `exclude` rule matches is skipped instead, with a
line (launchers/plan/exclude.py). The suite's commit is looked up once per sweep.
"""
import sys
from dataclasses import dataclass
from typing import NoReturn

import launchers
from contract import exits, secrets
from launchers import auto, suite
from launchers.plan import cpu_estimate, exclude, points
from launchers.suite import ConfigError

# (sweep folder, point names) of each sweep `main` handed to its launchers in this process, dry
# runs aside: Hydra returns nothing of a run to launch.py, which reads its exit status here.
ran: list[tuple[str, list[str]]] = []


@dataclass
class Job:
    cfg: object        # the point's composed config (an OmegaConf DictConfig, no hydra node)
    sweep_dir: str
    num: int
    overrides: list


def make_points(jobs) -> list:
    """[(point, dry_run)] for every job, each checked by its launcher; ConfigError if any
    job is refused (the first refusal, and how many there were)."""
    if any(job.cfg.launcher.get("name") == "auto" for job in jobs):
        auto.announce()
    commit = suite.commit()
    made, refused, skipped = [], [], 0
    for job in jobs:
        try:
            rule = exclude.matching(job.cfg, exclude.rules(job.cfg))
        except exclude.RuleError as exc:
            raise ConfigError(str(exc)) from None
        if rule is not None:
            skipped += 1
            given = secrets.mask_text(" ".join(job.overrides))
            print(f"skipped sweep point {job.num} ({given}): excluded by {exclude.describe(rule)}")
            continue
        try:
            point = points.make_point(job.cfg, job.sweep_dir, job.num, job.overrides, commit=commit)
            launchers.get(point.launcher.name).check(point)
        except ConfigError as exc:
            refused.append((job, str(exc)))
            continue
        made.append((point, bool(job.cfg.get("dry_run"))))
    for note in dict.fromkeys(n for point, _ in made for n in point.notes):
        print(f"note: {note}")
    if refused and len(jobs) == 1:
        raise ConfigError(refused[0][1])
    if refused:
        job, why = refused[0]
        raise ConfigError(
            f"{why} (sweep point {job.num}: {' '.join(job.overrides)}; {len(refused)} of "
            f"{len(jobs)} points refused, none was run)")
    if skipped and not made:
        raise ConfigError(f"every point of the sweep is excluded ({skipped} of {len(jobs)})")
    for line in dict.fromkeys(filter(None, (cpu_estimate.warning(p) for p, _ in made))):
        print(f"note: {line}")   # a GPU-sized point about to train on this CPU, and for how long
    return made


def submit(made) -> list:
    """make_points' points handed to their launchers, each launcher's at once -> the names."""
    groups: dict = {}  # (launcher, dry_run) -> points, in sweep order
    for point, dry_run in made:
        groups.setdefault((point.launcher.name, dry_run), []).append(point)
    for (name, dry_run), pts in groups.items():
        launchers.get(name).submit(pts, dry_run=dry_run)
    return [point.name for point, _ in made]


def run(jobs) -> list:
    """Make and check every point, then hand them to their launchers -> the point names."""
    made = make_points(jobs)
    names = submit(made)
    if not all(dry_run for _, dry_run in made):
        ran.append((jobs[0].sweep_dir, [point.name for point, dry_run in made if not dry_run]))
    return names


def fail(message: str) -> NoReturn:
    """Bad input in one line, its secrets masked (an override may hold one: contract/secrets.py)."""
    print(f"error: {secrets.mask_text(message)}", file=sys.stderr)
    sys.exit(exits.REFUSED)


def main(jobs) -> list:
    try:
        return run(jobs)
    except ConfigError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write results under {jobs[0].sweep_dir}: {exc.strerror or exc}")
