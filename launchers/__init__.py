"""Launchers: how a sweep point's ranks get started. One module per launcher, each with
the same small surface, which launchers/sweep.py calls and nothing else:

    check(point)                    refuse, with points.ConfigError, what this launcher
                                    cannot do; called for every point of a sweep before
                                    any point runs (launchers/sweep.py)
    submit_all(points, dry_run)     run (local) or queue (Slurm: one job array per
                                    allocation shape) the sweep's points, all checked
    submit(point, dry_run)          the same for one point
    submit_search(point, dry_run)   the same for a `search=` point (launchers/search.py)
    start_repeat(point, spec, rdir) how one repeat's ranks start and end -> (rank_ends,
                                    ended_by); the driver (launchers/driver.py) calls it
"""
import importlib

LAUNCHERS = ("local", "slurm")  # launcher=auto is one of them, chosen by launchers/auto.py


def get(name: str):
    if name not in LAUNCHERS:
        raise ValueError(f"unknown launcher {name!r} (valid: {', '.join(LAUNCHERS)})")
    return importlib.import_module(f"launchers.{name}")
