"""The run spec a worker reads and the per-rank record it writes (docs/records.md).

Both are JSON. A record is written once, at the end of the rank's run, to a
temporary name and renamed into place, so a crash leaves a whole record or
none. Standard library only: this runs in the framework's Python.
"""
import json
import os
import tempfile

SPEC_SCHEMA = "dlbench.spec"
RECORD_SCHEMA = "dlbench.rank"
SCHEMA_VERSION = 1

# Final statuses of a rank, a run and a point, worst first: when ranks of one
# run disagree, the run takes the worst.
STATUSES = ("failed", "oom", "timeout", "cancelled", "ok")

SPEC_KEYS = ("point", "repeat", "framework", "model", "precision", "batch_size",
             "warmup_steps", "measure_steps", "record_dir")


def worst(statuses):
    return min(statuses, key=STATUSES.index, default="failed")


def record_name(rank: int) -> str:
    return f"rank-{rank:05d}.json"


def write_json_atomic(path, obj) -> None:
    """Write obj as JSON so that readers see the old file, the new one, or none."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=folder)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=1, default=str)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_spec(path) -> dict:
    with open(path) as f:
        spec = json.load(f)
    if spec.get("schema") != SPEC_SCHEMA or spec.get("version") != SCHEMA_VERSION:
        raise ValueError(f"{path}: not a {SPEC_SCHEMA} v{SCHEMA_VERSION} file")
    missing = [k for k in SPEC_KEYS if k not in spec]
    if missing:
        raise ValueError(f"{path}: spec lacks {', '.join(missing)}")
    return spec


def new_record(spec: dict, dist, host: str, origin_unix: float) -> dict:
    """The skeleton of a rank record; the harness fills steps, window and status."""
    return {
        "schema": RECORD_SCHEMA,
        "version": SCHEMA_VERSION,
        "status": "failed",
        "error": None,
        "point": spec["point"],
        "repeat": spec["repeat"],
        "rank": dist.rank,
        "world_size": dist.world_size,
        "local_rank": dist.local_rank,
        "local_world_size": dist.local_world_size,
        "host": host,
        "framework": {"name": spec["framework"], "version": None},
        "environment": {},
        "spec": spec,
        "clock": {"origin_unix": origin_unix, "unit": "s"},
        "window": None,
        "steps": [],
        "memory": {"peak_device_bytes": None, "peak_host_bytes": None},
        "started_unix": origin_unix,
        "ended_unix": None,
    }


RUN_SCHEMA = "dlbench.run"


def run_status(rank_records: dict, world_size: int, ended_by=None):
    """One repeat's status and error from its ranks' records.

    rank_records maps rank -> record (or None where the rank wrote none).
    ended_by is what stopped the repeat from outside ("timeout" or "cancelled"),
    which wins over whatever the ranks said as they were being killed. Otherwise
    the first rank to end badly names the status: its peers often fail only
    because it left (a broken collective, a rendezvous timeout), and ranks stopped
    by the launcher after it say `cancelled`.
    """
    if ended_by:
        return ended_by, f"repeat ended by {ended_by}"
    bad = [(r, rec) for r, rec in rank_records.items() if rec is not None and rec["status"] != "ok"]
    causes = [(r, rec) for r, rec in bad if rec["status"] != "cancelled"] or bad
    if causes:
        rank, rec = min(causes, key=lambda item: (item[1].get("ended_unix") or 0, item[0]))
        return rec["status"], f"rank {rank}: {rec['error']}"
    missing = [r for r in range(world_size) if rank_records.get(r) is None]
    if missing:
        return "failed", f"no record from rank(s) {', '.join(map(str, missing))}"
    return "ok", None
