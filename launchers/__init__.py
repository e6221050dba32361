"""Launchers: how a sweep point's ranks get started. One module per launcher,
each with `check(point)` (raises points.ConfigError) and `submit(point, dry_run)`."""
import importlib

LAUNCHERS = ("local", "slurm")


def get(name: str):
    if name not in LAUNCHERS:
        raise ValueError(f"unknown launcher {name!r} (valid: {', '.join(LAUNCHERS)})")
    return importlib.import_module(f"launchers.{name}")
