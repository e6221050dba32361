"""Launchers: from a composed config to a sweep's points, and how each point's ranks get
started (docs/architecture.md).

    plan/       decides: Hydra's config -> checked points (checks, points, search, sweep,
                exclude, precheck)
    backends/   executes: one launcher object per backend over one base (base.py): local,
                slurm/; the step runner (step.py), the port rule, the container runtimes
    driver/     executes, once per allocation with the backend's object: the preflight, the
                repeat loop, a repeat's run spec, the search loop and its ledger
    suite.py    the checkout, its commit, ConfigError; sweepdir.py, the sweep folder's files;
    auto.py     which backend launcher=auto picks: what plan/ and the executing side share
    health/     the health step, its verdict, the site's figures, the health.* settings
    commands/   `launch status`, `launch cancel`, `launch dataset`, `launch doctor`,
                `launch health`

plan/ imports neither backends/ nor driver/, and they do not import plan/
(tests/unit/test_import_circles.py): the planner names a backend to `get`, below. Inside,
the imports run down one order of layers (tests/import_graph.py's LAUNCHERS_LAYERS): this
registry, suite.py, sweepdir.py, auto.py < the backends' primitives (stopping.py, worker.py,
then step.py) < health/ < driver/ < the launcher objects, beside plan/ < commands/.

`get(name)` is the backend's launcher object (launchers/backends/base.py says its surface):
`check(point)` for every point before any runs, `submit(points, dry_run)` with all of a
sweep's points (searches included), `health(point)` for `launch health`; in its allocation
`start_repeat`, `health_step`, `where` and `resubmit_without`, which the driver (the repeat
loop, the search and the preflight) calls. From outside, `live` and `cancel` on the folders
`owners` gives each backend (`launch status`, `launch cancel`).
"""
import importlib
import os

from contract import paths

# launcher=auto is one of them, chosen by launchers/auto.py
BACKENDS = {"local": ("launchers.backends.local", "LocalLauncher"),
            "slurm": ("launchers.backends.slurm.launcher", "SlurmLauncher")}
LAUNCHERS = tuple(BACKENDS)
# The record each backend keeps in a point's folder (SWEEP/points/<p>/) naming what runs it:
# how a folder read from outside names its backend.
RECORDS = {"local": paths.LOCAL_FILE, "slurm": paths.SLURM_FILE}


def owner(folder: str):
    """The backend whose record is in a point's folder (the newest, where a rerun into the
    folder took another backend), or None (a local sweep older than its record)."""
    found = []
    for name, record in RECORDS.items():
        try:
            found.append((os.stat(os.path.join(folder, record)).st_mtime, name))
        except OSError:
            pass
    return max(found)[1] if found else None


def owners(folders) -> dict:
    """backend -> the folders it owns, in the order given; folders of no backend left out."""
    out: dict = {}
    for folder in folders:
        name = owner(folder)
        if name is not None:
            out.setdefault(name, []).append(folder)
    return out


def get(name: str):
    """The launcher object of backend `name` (imported when asked for: submitit only for Slurm)."""
    if name not in BACKENDS:
        raise ValueError(f"unknown launcher {name!r} (valid: {', '.join(LAUNCHERS)})")
    module, cls = BACKENDS[name]
    return getattr(importlib.import_module(module), cls)()
