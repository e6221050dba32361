"""Launchers: from a composed config to a sweep's points, and how each point's ranks get
started (docs/architecture.md).

    plan/       Hydra's config -> checked points (points, sweep, exclude, precheck, search)
    backends/   one launcher object per backend over one base (base.py): local, slurm/;
                launcher=auto's choice; the step runner (step.py) and the port rule
    repeats.py  the repeat loop, run once per allocation with the backend's object
    health/     the node checks: `launch health`, preflight=true, the verdict
    commands/   `launch status`, `launch cancel`, `launch dataset`

`get(name)` is the backend's launcher object (launchers/backends/base.py says its surface):
`check(point)` for every point before any runs, `submit(points, dry_run)` with all of a
sweep's points (searches included), `health(point)` for `launch health`; in its allocation
`start_repeat`, `health_step`, `where` and `resubmit_without`, which the repeat loop, the
search and the preflight call.
"""
import importlib

# launcher=auto is one of them, chosen by launchers/auto.py
BACKENDS = {"local": ("launchers.backends.local", "LocalLauncher"),
            "slurm": ("launchers.backends.slurm.launcher", "SlurmLauncher")}
LAUNCHERS = tuple(BACKENDS)


def get(name: str):
    """The launcher object of backend `name` (imported when asked for: submitit only for Slurm)."""
    if name not in BACKENDS:
        raise ValueError(f"unknown launcher {name!r} (valid: {', '.join(LAUNCHERS)})")
    module, cls = BACKENDS[name]
    return getattr(importlib.import_module(module), cls)()
