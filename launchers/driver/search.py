"""The largest value of one config key that still trains, found by running it: OOM is data.

    python -m launch model=insightface gpus_per_node=2 \\
        'search={key:model.num_classes,start:1024,max:16777216,tolerance:0.05}'

A driver-level loop, run where the tries run (each next value depends on how the last try
ended, which only the allocation knows): the value doubles from `start` until a try ends
`oom` (or `max` is reached), then bisection between the largest value that trained and the
smallest that did not, until they are within `tolerance` (relative) of each other. Each try
is a real run, a point of its own (SWEEP/points/<point>-<name>=<value>/) whose repeats the
driver runs as it runs any point's. The tries and the answer are kept in
SWEEP/searches/<point>.json, the ledger (launchers/driver/ledger.py), rewritten after every
try. The ledger is the search's memory: run again (a rerun into the same sweep, a requeued
Slurm allocation), the search replays the same rule and takes the outcome of every value
the ledger already holds instead of trying it again; a try cut short resumes at its first
unrecorded repeat. The settings come checked and whole with the point (the planner made
them so: launchers/plan/search.py).

Where the tries run is the launcher object's business (`run` is handed it and calls its
`start_repeat` through the repeat loop): one after another here (launchers/backends/local.py),
as srun steps inside one allocation on Slurm (launchers/backends/slurm/launcher.py).

A try is `ok` when all its repeats are; `oom` when one ended `oom`, or failed because a rank
ran out of memory (its peers then fail on a broken collective); anything else stops the
search, since it says nothing about memory. `key` is any integer setting of the point:
`model.num_classes`, `model.deep_vocab_size`, or `batch_size` (issue 6's batch_size=max).
"""
import math
import time
from pathlib import Path

from contract import statuses
from contract.frozen import Settings
from launchers import sweepdir
from launchers.driver import ledger as ledgers, repeats


def _path(key: str):
    return key.split(".")



def _set(settings: Settings, path: list, value) -> Settings:
    """The settings with the value at `path` (a list of keys) replaced."""
    head, *rest = path
    if not rest:
        return settings.replace(**{head: value})
    return settings.replace(**{head: _set(settings.get(head) or Settings(), rest, value)})


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


def run(base, launcher, log=print) -> dict:
    """Run the search of a point, each try's repeats with `launcher` (the backend's object in
    its allocation; launchers/driver/repeats.py); every value the ledger already holds is
    taken from it, not tried again."""
    s = base.search
    ledger = ledgers.fresh(base)
    known = {t["value"]: t for t in (ledgers.read(base) or {}).get("tries", [])
             if t.get("outcome") in ("ok", "oom")}

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
        ledgers.write(base, ledger)
        log(f"search {s['key']}={value}: {result}")
        return result

    ledger.update(find_largest(attempt, s["start"], s["max"], s["tolerance"]), done=True,
                  ended_unix=time.time())
    ledgers.write(base, ledger)
    found = ledger["largest_ok"]
    log(f"search {s['key']}: largest that trains {found if found is not None else 'none'}"
        + (f", smallest out of memory {ledger['smallest_oom']}" if ledger["smallest_oom"] else "")
        + (f" (stopped at {ledger['stopped']})" if ledger["stopped"] else ""))
    return ledger


def describe(point) -> str:
    """A search's plan in one line (what a dry run prints)."""
    s = point.search
    return (f"{point.name}: search {s['key']} from {s['start']}, doubling to at most "
            f"{s['max']}, then bisection to {s['tolerance']:.0%}; each try a point of its own")

