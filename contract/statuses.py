"""The status rules, written once: how a rank, a repeat and a point end, and why.

A rank's record says how it ended: `ok`, `failed`, `oom`, `timeout`, `cancelled`,
or `unsupported` (the device or framework lacks what the point asks for, such as
bf16 on a CPU without AVX512-BF16; frameworks/common/capability.py). A repeat's
status comes from its ranks' records and, for ranks that left none, from how their
processes ended (`rank_ends`: exit code or signal, node, log). A point's status
comes from its repeats; a point whose preflight (preflight=true, launchers/driver/preflight.py)
found too few healthy nodes ends `unhealthy` without a repeat. The analysis adds `corrupt`
for a file it cannot read. A checkpoint's storage names three endings of its own
(`storage_ending`: a folder that cannot be written, a full disk, a shard missing at load).
Standard library only: the driver and the analysis both use it.
"""
import errno
import signal
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# A checkpoint's storage ended the repeat (bench=checkpoint, checkpoint.every; docs/checkpoint.md).
UNWRITABLE, DISK_FULL, MISSING_SHARD = "unwritable", "disk_full", "missing_shard"
STORAGE = (DISK_FULL, UNWRITABLE, MISSING_SHARD)
# Worst first: when ranks of one run or runs of one point disagree, the worst wins.
STATUSES = ("failed", "oom", *STORAGE, "timeout", "cancelled", "unsupported", "ok")
# A point's own ending, before any repeat: preflight found too few healthy nodes to run on.
UNHEALTHY = "unhealthy"
LOG_TAIL_LINES = 20
LOG_LINE_CHARS = 240


class Cancelled(Exception):
    """The rank got SIGTERM (Slurm cancel or time limit, or the driver's timeout): its
    record says `cancelled`. Here, not in the harness, so that the harness and what it
    calls (common/profile.py) both know it without importing each other."""


class Unsupported(Exception):
    """This device or framework cannot run what the point asks for: the record says
    `unsupported` with this one line. Here beside Cancelled, so that the registry
    (frameworks/registry.py) raises it without importing the workers' runtime."""


class StorageEnding(Exception):
    """A checkpoint's storage ended the rank: its class names the status (the harness
    records `status`), its message the path and the system's reason."""
    status = "failed"


class Unwritable(StorageEnding):
    status = UNWRITABLE


class DiskFull(StorageEnding):
    status = DISK_FULL


class MissingShard(StorageEnding):
    status = MISSING_SHARD


# errno -> the ending it names; ENOENT only while a checkpoint is read (a shard gone).
_WRITING: dict[int, type[StorageEnding]] = {errno.ENOSPC: DiskFull, errno.EDQUOT: DiskFull, errno.EFBIG: DiskFull,
            errno.EROFS: Unwritable, errno.EACCES: Unwritable, errno.EPERM: Unwritable}
_READING: dict[int, type[StorageEnding]] = {errno.ENOENT: MissingShard}


def storage_ending(code: int | None, reading: bool = False) -> type[StorageEnding] | None:
    """The StorageEnding class an OSError's errno names while a checkpoint is written, or
    while one is read (`reading`: a missing file is a missing shard); None: any other error
    is `failed`."""
    return (_READING if reading else _WRITING).get(code) if code is not None else None


def worst(statuses: Iterable[str]) -> str:
    return min(statuses, key=STATUSES.index, default="failed")


def signal_name(exit_code: int | None) -> str | None:
    """'SIGSEGV' for a process killed by a signal (a negative Popen return code, or a
    shell's 128+N), else None."""
    if exit_code is None:
        return None
    n = -exit_code if exit_code < 0 else exit_code - 128 if 128 < exit_code < 128 + 65 else None
    try:
        return signal.Signals(n).name if n else None
    except ValueError:
        return f"signal {n}"


def describe_end(end: Mapping[str, Any]) -> str:
    """How a process ended, in words: 'killed by SIGSEGV', 'exit code 3'."""
    sig = end.get("signal") or signal_name(end.get("exit_code"))
    if sig:
        text = f"killed by {sig}"
        if sig == "SIGKILL":
            text += " (the kernel's out-of-memory killer is a likely cause)"
        return text
    if end.get("exit_code") is None:
        return "no exit status known (its node may be lost)"
    return f"exit code {end['exit_code']}"


def tail(text: str, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last non-empty lines of a log, each trimmed to LOG_LINE_CHARS."""
    out = [ln.rstrip() for ln in text.splitlines() if ln.strip()][-lines:]
    return [ln if len(ln) <= LOG_LINE_CHARS else ln[:LOG_LINE_CHARS - 3] + "..." for ln in out]


def _where(rank: int, end: Mapping[str, Any]) -> str:
    node = (end or {}).get("node")
    return f"rank {rank} ({node})" if node else f"rank {rank}"


def final(run: Mapping[str, Any]) -> bool:
    """Whether a recorded repeat (its run.json) is done for good: every ending is a finding
    about the point but `cancelled`, a repeat stopped from outside (its launcher stopped, its
    job cancelled, its ranks signalled) before it could measure anything. A rerun into the
    folder, or a requeued allocation, runs a cancelled repeat again."""
    return run.get("status") != "cancelled"


def run_status(rank_records: Mapping[int, Any], world_size: int, ended_by: str | None = None,
               rank_ends: Mapping[int, Any] | None = None) -> tuple[str, str | None]:
    """One repeat's (status, error): `run_outcome`'s first two."""
    out = run_outcome(rank_records, world_size, ended_by, rank_ends)
    return out["status"], out["error"]


def run_outcome(rank_records: Mapping[int, Any], world_size: int, ended_by: str | None = None,
                rank_ends: Mapping[int, Any] | None = None, why: str | None = None) -> dict[str, Any]:
    """One repeat's {status, error, cause, lost} from its ranks: `cause` is the rank whose
    ending names the status (None if none), `lost` the ranks that left no record.

    rank_records maps rank -> record (None where the rank wrote none). rank_ends maps
    rank -> {exit_code, signal, node, stopped}: how each rank's process ended, where
    the launcher knows (`stopped` when the launcher itself ended it after a peer
    failed or the repeat timed out). ended_by is what stopped the repeat from outside
    ("timeout" or "cancelled"): it names the status, `why` says it in the error (the
    signal that stopped the launcher: "SIGINT to the launcher"), and the ranks' first
    cause stays in the error.

    The first cause names the status: a rank that died without a record of its own
    accord (a crash: a signal or a non-zero exit), else the first rank whose record
    says it failed. Peers of a failed rank often fail only because it left (a broken
    collective), and ranks stopped after it say `cancelled`. Ranks that left no record
    are named, with their node, in every case.
    """
    rank_ends = rank_ends or {}
    missing = [r for r in range(world_size) if rank_records.get(r) is None]
    crashed = [r for r in missing if not rank_ends.get(r, {}).get("stopped")
               and (rank_ends.get(r, {}).get("signal") or rank_ends.get(r, {}).get("exit_code"))]
    bad = [(r, rec) for r, rec in rank_records.items() if rec is not None and rec["status"] != "ok"]
    causes = [(r, rec) for r, rec in bad if rec["status"] != "cancelled"] or bad
    status = error = cause = None
    if crashed:
        cause = crashed[0]
        status, error = "failed", f"{_where(cause, rank_ends[cause])} left no record: " \
                                  f"{describe_end(rank_ends[cause])}"
    elif causes:
        cause, rec = min(causes, key=lambda item: (item[1].get("ended_unix") or 0, item[0]))
        status, error = rec["status"], f"rank {cause}: {rec['error']}"
    others = [r for r in missing if r != cause]
    if others:
        nodes = sorted({rank_ends[r]["node"] for r in others if rank_ends.get(r, {}).get("node")})
        where = f" (on {', '.join(nodes)})" if nodes else ""
        lost = f"no record from rank(s) {_ranges(others)}{where}"
        status = status or "failed"
        error = f"{error}; {lost}" if error else lost
    if ended_by:
        status, error = ended_by, f"repeat ended by {why or ended_by}" + (f"; first: {error}" if error else "")
    return {"status": status or "ok", "error": error, "cause": cause, "lost": missing}


def _ranges(ranks: Sequence[int]) -> str:
    """'0, 2-5, 7': a long list of lost ranks (a whole node's) stays one short line;
    runs of three or more are folded."""
    out: list[str] = []
    start: int | None = None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            out += [f"{start}-{r}"] if r - start >= 2 else [str(x) for x in range(start, r + 1)]
            start = None
    return ", ".join(out)


def point_status(run_statuses: Iterable[str], repeats: int, preflight: str | None = None) -> str:
    """A point's status from its recorded repeats' statuses (any order), how many it asked
    and its preflight's outcome (None without one): ok (all ok), partial (some ok), the
    worst ending (none ok, all recorded or not), unhealthy (nothing recorded: preflight found
    too few healthy nodes), incomplete (repeats started, none ended), missing (nothing)."""
    run_statuses = list(run_statuses)
    if not run_statuses and preflight == UNHEALTHY:
        return UNHEALTHY
    n_ok = run_statuses.count("ok")
    if n_ok and n_ok >= repeats:
        return "ok"
    if n_ok:
        return "partial"
    ended = [s for s in run_statuses if s in STATUSES]
    if ended:
        return worst(ended)
    if "corrupt" in run_statuses:
        return "corrupt"
    return "incomplete" if run_statuses else "missing"
