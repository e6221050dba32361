"""The largest value of one config key that still trains, found by running it: OOM is data.

    python -m launch model=insightface gpus_per_node=2 \\
        'search={key:model.num_classes,start:1024,max:16777216,tolerance:0.05}'

A driver-level loop: the value doubles from `start` until a try ends `oom` (or `max` is
reached), then bisection between the largest value that trained and the smallest that did
not, until they are within `tolerance` (relative) of each other. Each try is a real run, a
point of its own (SWEEP/points/<point>-<name>=<value>/) whose repeats the driver runs as it
runs any point's. The tries and the answer are kept in SWEEP/searches/<point>.json, the
ledger, rewritten after every try. The ledger is the search's memory: run again (a rerun
into the same sweep, a requeued Slurm allocation), the search replays the same rule and
takes the outcome of every value the ledger already holds instead of trying it again; a
try cut short resumes at its first unrecorded repeat.

Where the tries run is the launcher object's business (`run` is handed it and calls its
`start_repeat` through the repeat loop): one after another here (launchers/backends/local.py),
as srun steps inside one allocation on Slurm (launchers/backends/slurm/launcher.py).

A try is `ok` when all its repeats are; `oom` when one ended `oom`, or failed because a rank
ran out of memory (its peers then fail on a broken collective); anything else stops the
search, since it says nothing about memory. `key` is any integer setting of the point:
`model.num_classes`, `model.deep_vocab_size`, or `batch_size` (issue 6's batch_size=max).
"""
import json
import math
import os
import time
from collections.abc import Mapping
from pathlib import Path

from contract import paths, records, statuses, values
from contract.frozen import Settings
from launchers import repeats, sweepdir
from launchers.suite import ConfigError

SCHEMA = paths.SEARCH_SCHEMA
DEFAULTS = {"start": None, "max": None, "tolerance": 0.05}


def settings(point) -> dict:
    """The point's search settings, checked; raises ConfigError."""
    s = point.search
    if not isinstance(s, Mapping) or not isinstance(s.get("key"), str):
        raise ConfigError("search needs a key, e.g. search={key:model.num_classes,start:1024}")
    unknown = set(s) - {"key", *DEFAULTS}
    if unknown:
        raise ConfigError(f"unknown search setting(s) {', '.join(sorted(unknown))} "
                                 f"(valid: key, {', '.join(DEFAULTS)})")
    s = {**DEFAULTS, **s}
    current = _get(point, s["key"])
    if not values.is_integer(current):
        raise ConfigError(f"search key {s['key']!r} is not an integer setting of this point")
    s["start"] = current if s["start"] is None else s["start"]
    s["max"] = s["start"] * 2**20 if s["max"] is None else s["max"]
    for name in ("start", "max"):
        values.integer(s[name], f"search.{name}", error=ConfigError)
    if s["max"] < s["start"]:
        raise ConfigError(f"search.max ({s['max']}) is below search.start ({s['start']})")
    if not values.is_number(s["tolerance"]) or not 0 < s["tolerance"] < 1:
        raise ConfigError(f"search.tolerance must be a fraction in (0, 1), got {s['tolerance']!r}")
    return s


def _path(key: str):
    return key.split(".")


def _get(point, key: str):
    """The value of a dotted key of the point (`batch_size`, `model.num_classes`), or None."""
    head, *rest = _path(key)
    node = getattr(point, head, None)
    for part in rest:
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _set(settings: Settings, path: list, value) -> Settings:
    """The settings with the value at `path` (a list of keys) replaced."""
    head, *rest = path
    if not rest:
        return settings.replace(**{head: value})
    return settings.replace(**{head: _set(settings.get(head) or Settings(), rest, value)})


# What makes two ledgers the same search: a try's outcome depends on these, not on the
# search's start, max or tolerance.
SAME_SEARCH = ("point", "key", "framework", "model", "model_size", "precision", "batch_size",
               "nodes", "gpus_per_node", "compile", "memory_limit_mb")


def max_tries(s: dict) -> int:
    """At most how many values find_largest tries with these settings: doubling up from
    start to max (or halving down to 1), then bisection to the tolerance. Sizes the
    allocation of a search on Slurm."""
    up = math.ceil(math.log2(s["max"] / s["start"])) + 1
    down = int(math.log2(s["start"])) + 1
    return max(up, down) + math.ceil(math.log2(1 / s["tolerance"])) + 1


def find_largest(attempt, start: int, maximum: int, tolerance: float) -> dict:
    """Run `attempt(value) -> 'ok' | 'oom' | other` to find the largest value that is ok.

    Returns {largest_ok, smallest_oom, stopped}: `stopped` says why the search ended early
    (a try that was neither ok nor oom), else None."""
    ok, oom, value = None, None, start
    while value is not None:
        outcome = attempt(value)
        if outcome not in ("ok", "oom"):
            return {"largest_ok": ok, "smallest_oom": oom, "stopped": f"{value}: {outcome}"}
        if outcome == "ok":
            ok = value
        else:
            oom = value
        value = _next_value(ok, oom, value, maximum, tolerance)
    return {"largest_ok": ok, "smallest_oom": oom, "stopped": None}


def _next_value(ok, oom, value: int, maximum: int, tolerance: float):
    """The value to try after `value`, or None when the search is done: doubling up while
    every value trains (halving down while none does), then bisection between the largest
    that trained and the smallest that did not, until they are within the tolerance."""
    if ok is None:
        return value // 2 if value > 1 else None
    if oom is None:
        return min(value * 2, maximum) if value < maximum else None
    return (ok + oom) // 2 if oom - ok > max(1, tolerance * ok) else None


def try_point(base, s: dict, value: int):
    """The base point with the searched key set to value, as a point of its own."""
    head, *rest = _path(s["key"])
    name = f"{base.name}-{_path(s['key'])[-1]}={value}"
    changes = {head: _set(getattr(base, head), rest, value) if rest else value,
               "config": _set(base.config, _path(s["key"]), value),
               "name": name, "dir": str(Path(base.dir).parent / name),
               "search": Settings(s, base=base.name, value=value)}
    if s["key"] == "batch_size" and base.parallel:  # the micro-batch of a layout, and its global
        changes["parallel"] = base.parallel.with_micro(value)
    return base.replace(**changes)


def outcome(point, ended: list) -> str:
    """ok, oom, or the worst other status of a try's repeats."""
    if ended and all(st == "ok" for st in ended):
        return "ok"
    if "oom" in ended:
        return "oom"
    for repeat, st in enumerate(ended):
        if st == "failed":  # a rank out of memory, its peers failing on the broken collective
            ranks = sweepdir.read_rank_records(point.repeat_dir(repeat), point.world_size)
            if any(r is not None and r["status"] == "oom" for r in ranks.values()):
                return "oom"
    return statuses.worst(ended) if ended else "failed"


def ledger_path(base) -> str:
    return paths.search_ledger(base.sweep, base.name)


def new_ledger(base) -> dict:
    """A search's ledger before its first try."""
    s = settings(base)
    return {"schema": SCHEMA, "version": paths.SCHEMA_VERSION, "point": base.name, "key": s["key"],
            "start": s["start"], "max": s["max"], "tolerance": s["tolerance"],
            "framework": base.framework.name, "model": base.model.name,
            "model_size": base.model.get("size"), "precision": base.precision,
            "batch_size": base.batch_size, "nodes": base.nodes,
            "gpus_per_node": base.gpus_per_node, "world_size": base.world_size,
            "compile": base.compile, "memory_limit_mb": base.memory_limit_mb,
            "tries": [], "done": False, "largest_ok": None, "smallest_oom": None, "stopped": None}


def read_ledger(base):
    """The ledger already on disk for this very search (SAME_SEARCH), else None."""
    try:
        with open(ledger_path(base)) as f:
            old = json.load(f)
    except (OSError, ValueError):
        return None
    fresh = new_ledger(base)
    if not isinstance(old, dict) or any(old.get(k) != fresh[k] for k in SAME_SEARCH) \
            or not isinstance(old.get("tries"), list):
        return None
    return old


def begin(base) -> dict:
    """The search's ledger, written now if there is none for it yet: what a search queued on
    Slurm shows before its first try. Returns the ledger (done: nothing left to try)."""
    old = read_ledger(base)
    fresh = new_ledger(base)
    if old is not None and all(old.get(k) == fresh[k] for k in ("start", "max", "tolerance")):
        return old
    os.makedirs(os.path.dirname(ledger_path(base)), exist_ok=True)
    records.write_json_atomic(ledger_path(base), dict(fresh, tries=(old or {}).get("tries", [])))
    return fresh


def run(base, launcher, log=print) -> dict:
    """Run the search of a point, each try's repeats with `launcher` (the backend's object in
    its allocation; launchers/repeats.py); every value the ledger already holds is taken from
    it, not tried again."""
    s = settings(base)
    ledger = new_ledger(base)
    known = {t["value"]: t for t in (read_ledger(base) or {}).get("tries", [])
             if t.get("outcome") in ("ok", "oom")}
    path = ledger_path(base)
    os.makedirs(os.path.dirname(path), exist_ok=True)

    def attempt(value):
        if value in known:  # tried before this run (a requeue, a rerun): the ledger remembers
            ledger["tries"].append(known[value])
            log(f"search {s['key']}={value}: {known[value]['outcome']} (in the ledger; not tried again)")
            return known[value]["outcome"]
        p = try_point(base, s, value)
        sweepdir.write_point(p)
        statuses = repeats.run_point(p.dir, launcher, log)
        result = outcome(p, statuses)
        ledger["tries"].append({"value": value, "point": p.name, "outcome": result,
                                "statuses": statuses})
        records.write_json_atomic(path, ledger)
        log(f"search {s['key']}={value}: {result}")
        return result

    ledger.update(find_largest(attempt, s["start"], s["max"], s["tolerance"]), done=True,
                  ended_unix=time.time())
    records.write_json_atomic(path, ledger)
    found = ledger["largest_ok"]
    log(f"search {s['key']}: largest that trains {found if found is not None else 'none'}"
        + (f", smallest out of memory {ledger['smallest_oom']}" if ledger["smallest_oom"] else "")
        + (f" (stopped at {ledger['stopped']})" if ledger["stopped"] else ""))
    return ledger


def describe(point) -> str:
    """A search's plan in one line (what a dry run prints)."""
    s = settings(point)
    return (f"{point.name}: search {s['key']} from {s['start']}, doubling to at most "
            f"{s['max']}, then bisection to {s['tolerance']:.0%}; each try a point of its own")

