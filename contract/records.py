"""The run spec a worker reads and the per-rank record it writes (docs/contract.md).

Both are JSON. A record is written once, at the end of the rank's run, to a
temporary name and renamed into place, so a crash leaves a whole record or
none. Standard library only: this runs in the framework's Python.
"""
import json
import os
from collections.abc import Mapping
from secrets import token_hex
from typing import Any

from . import paths, secrets

SPEC_SCHEMA = paths.SPEC_SCHEMA
RECORD_SCHEMA = paths.RANK_SCHEMA
RUN_SCHEMA = paths.RUN_SCHEMA
SCHEMA_VERSION = paths.SCHEMA_VERSION

Record = dict[str, Any]   # a rank record: JSON, its fields docs/contract.md's



def _create_temporary(folder: str) -> tuple[int, str]:
    """(fd, path) of a new file beside the target, created with mode 0666 less the umask
    (as open() would): a record is as readable as any other file its user writes, where
    tempfile.mkstemp would leave it 0600."""
    for _ in range(100):
        tmp = os.path.join(folder, f".tmp-{os.getpid()}-{token_hex(6)}.json")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0),
                           0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {folder}")


def write_json_atomic(path: str, obj: object) -> None:
    """Write obj as JSON so that readers see the old file, the new one, or none. The file
    gets the mode the umask gives (0644 under umask 022). Its secrets are masked
    (contract/secrets.py: by the rule, the site's keys obj declares, and the values of this
    process's secret variables): every record of the suite is written here."""
    obj = secrets.masked(obj, values=secrets.environ_values(extra=secrets.declared(obj)))
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = _create_temporary(folder)
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


def read_json(path: str) -> Any:
    """A whole JSON file's content, or None where it is missing or unreadable."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def update_json(path: str, **fields: Any) -> bool:
    """A JSON object's file with `fields` set, written whole as write_json_atomic writes; False
    (nothing written) where the file is missing, unreadable or not an object."""
    rec = read_json(path)
    if not isinstance(rec, dict):
        return False
    write_json_atomic(path, {**rec, **fields})
    return True


def new_record(spec: Mapping[str, Any], dist: Any, host: str, origin_unix: float) -> Record:
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
        "memory": {"peak_device_bytes": None, "peak_host_bytes": None, "peak_tensor_bytes": None},
        "started_unix": origin_unix,
        "ended_unix": None,
    }
