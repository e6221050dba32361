"""A search's ledger, SWEEP/searches/<point>.json: its settings, every try (value, point,
outcome, statuses) and the answer, rewritten after each try (launchers/driver/search.py).

It is the search's memory: a rerun into the same sweep, or a requeued allocation, reads it
and takes every value it already holds instead of trying it again. The Slurm launcher reads
it at submission (a search already done is not queued again) and writes it first (`begin`),
so that `launch status` shows a queued search before its first try.
"""
import json
import os

from contract import paths, records

SCHEMA = paths.SEARCH_SCHEMA
# What makes two ledgers the same search: a try's outcome depends on these, not on the
# search's start, max or tolerance.
SAME_SEARCH = ("point", "key", "framework", "model", "model_size", "precision", "batch_size",
               "nodes", "gpus_per_node", "compile", "memory_limit_mb")


def path(base) -> str:
    return paths.search_ledger(base.sweep, base.name)


def fresh(base) -> dict:
    """A search's ledger before its first try (the base point's search settings are
    complete: launchers/plan/search.py)."""
    s = base.search
    return {"schema": SCHEMA, "version": paths.SCHEMA_VERSION, "point": base.name, "key": s["key"],
            "start": s["start"], "max": s["max"], "tolerance": s["tolerance"],
            "framework": base.framework.name, "model": base.model.name,
            "model_size": base.model.get("size"), "precision": base.precision,
            "batch_size": base.batch_size, "nodes": base.nodes,
            "gpus_per_node": base.gpus_per_node, "world_size": base.world_size,
            "compile": base.compile, "memory_limit_mb": base.memory_limit_mb,
            "tries": [], "done": False, "largest_ok": None, "smallest_oom": None, "stopped": None}


def read(base):
    """The ledger already on disk for this very search (SAME_SEARCH), else None."""
    try:
        with open(path(base)) as f:
            old = json.load(f)
    except (OSError, ValueError):
        return None
    new = fresh(base)
    if not isinstance(old, dict) or any(old.get(k) != new[k] for k in SAME_SEARCH) \
            or not isinstance(old.get("tries"), list):
        return None
    return old


def write(base, ledger: dict) -> None:
    os.makedirs(os.path.dirname(path(base)), exist_ok=True)
    records.write_json_atomic(path(base), ledger)


def begin(base) -> dict:
    """The search's ledger, written now if there is none for it yet: what a search queued on
    Slurm shows before its first try. Returns the ledger (done: nothing left to try)."""
    old, new = read(base), fresh(base)
    if old is not None and all(old.get(k) == new[k] for k in ("start", "max", "tolerance")):
        return old
    write(base, dict(new, tries=(old or {}).get("tries", [])))
    return new
