"""Launchers: how a sweep point's ranks get started. One module per launcher, each with
the same small surface, which launch.py calls and nothing else:

    check(point)                    refuse, with points.ConfigError, what this launcher
                                    cannot do; called once per point, before any point runs
    submit(point, dry_run)          run (local) or queue (Slurm) the point's repeats
    submit_search(point, dry_run)   the same for a `search=` point (launchers/search.py)
    start_repeat(point, spec, rdir) how one repeat's ranks start and end -> (rank_ends,
                                    ended_by); the driver (launchers/driver.py) calls it
"""
import importlib

LAUNCHERS = ("local", "slurm")


def get(name: str):
    if name not in LAUNCHERS:
        raise ValueError(f"unknown launcher {name!r} (valid: {', '.join(LAUNCHERS)})")
    return importlib.import_module(f"launchers.{name}")
