"""Who runs a local point: the local launcher's record in the point's folder, and whether that
process still lives (`launch status`, `launch cancel`; docs/statuses.md).

    SWEEP/points/<p>/local.json   {"schema": "dlbench.local", "version": 1, "pid": 4242,
                                   "created": "<boot id>/<start time>", "host": "node1",
                                   "started_unix": ..., "ended_unix": null, "cancelled_unix": null}

The launcher writes it whole when it starts the point (`begin`) and again when the point ends
(`end`), however it ends; `launch cancel` adds `cancelled_unix` before it signals the launcher,
and `end` keeps it. A pid alone could be another process's by now: the process counts as the
launcher only while its creation (`created`: the kernel's boot id and the process's start
time in clock ticks since that boot, /proc/<pid>/stat's 22nd field) is the one recorded; a
zombie has ended. (Linux's /proc, read here: psutil, which reads the same, is not among the
suite's requirements.)
"""
import os
import time
from typing import Optional

from contract import paths, records

VERSION = 1


def _path(folder: str) -> str:
    return os.path.join(folder, paths.LOCAL_FILE)


def created(pid: int) -> Optional[str]:
    """'<boot id>/<start time>' of a live process, None where there is none (or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()   # after the command's name: it may hold spaces
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except (OSError, IndexError):
        return None
    # fields[0] is the stat's 3rd field (state), so its 22nd (starttime) is fields[19]
    return None if fields[0] in ("Z", "X") else f"{boot}/{fields[19]}"


def this_process() -> dict:
    return {"pid": os.getpid(), "created": created(os.getpid()), "host": os.uname().nodename}


def read(folder: str) -> Optional[dict]:
    rec = records.read_json(_path(folder))
    return rec if isinstance(rec, dict) and isinstance(rec.get("pid"), int) else None


def begin(folder: str) -> None:
    """This process runs the point in `folder` from now on."""
    records.write_json_atomic(_path(folder), {"schema": paths.LOCAL_SCHEMA, "version": VERSION,
                                              **this_process(), "started_unix": time.time(),
                                              "ended_unix": None, "cancelled_unix": None})


def ours(folder: str) -> bool:
    """Whether the point's record names this process."""
    rec = read(folder)
    return rec is not None and same(rec, this_process())


def same(a: dict, b: dict) -> bool:
    return (a.get("pid"), a.get("created"), a.get("host")) == (b.get("pid"), b.get("created"), b.get("host"))


def end(folder: str) -> None:
    """The point ended (done, failed or stopped): what `cancel` added is kept."""
    records.update_json(_path(folder), ended_unix=time.time())


def mark_cancelled(folder: str, when: float) -> None:
    records.update_json(_path(folder), cancelled_unix=when)


def alive(rec: dict) -> Optional[bool]:
    """Whether the process the record names still runs: None where this host cannot tell (the
    record is another host's), False where it ended or its pid is another process's now."""
    if rec.get("host") != os.uname().nodename:
        return None
    pid = rec.get("pid")
    return isinstance(pid, int) and pid > 0 and rec.get("created") is not None and created(pid) == rec["created"]


def running(rec: dict) -> Optional[bool]:
    """Whether the point runs now: its launcher lives and has not ended it (None: cannot tell)."""
    live = alive(rec)
    return live if live is None else live and not rec.get("ended_unix")
