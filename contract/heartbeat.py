"""Rank 0's heartbeat: where a running point is, in one small file (paths.HEARTBEAT_FILE in
the point's folder), and the rules that read it: whether it is live, the ETA, the lines.

Its layout (schema paths.HEARTBEAT_SCHEMA), written whole (records.write_json_atomic) by
frameworks/common/heartbeat.py every BEAT_S while rank 0 trains, and once more at the loop's end:

    {"schema", "version", "repeat": 3 (0-based), "step": 52 (steps done, warm-up's and timed),
     "steps": 120 (warmup_steps + measure_steps), "phase": "warmup" | "timed" | "done",
     "started_unix": the loop's start, "updated_unix": this write}

The point's repeat count is not in it: the readers take it from point.json. Read by the
launcher's progress (launchers/driver/progress.py, here or in a Slurm allocation's driver) and
by `launch status` (launchers/commands/status.py). Standard library only.
"""
import os
import time
from typing import Any

from . import paths, records

BEAT_S = 2.0     # rank 0 writes its heartbeat this often
STALE_S = 30.0   # older than this, rank 0 is gone (or its clock is far off): not running


def beat(point_dir: str, repeat: int, step: int, steps: int, phase: str, started: float,
         now: float | None = None) -> None:
    """Write the point's heartbeat whole."""
    records.write_json_atomic(os.path.join(point_dir, paths.HEARTBEAT_FILE), {
        "schema": paths.HEARTBEAT_SCHEMA, "version": paths.SCHEMA_VERSION, "repeat": repeat,
        "step": step, "steps": steps, "phase": phase, "started_unix": started,
        "updated_unix": time.time() if now is None else now})


def read(point_dir: str) -> dict[str, Any] | None:
    """The point's heartbeat, or None where there is none or it is not one."""
    hb = records.read_json(os.path.join(point_dir, paths.HEARTBEAT_FILE))
    if not isinstance(hb, dict) or hb.get("schema") != paths.HEARTBEAT_SCHEMA:
        return None
    if not all(isinstance(hb.get(k), (int, float)) for k in
               ("repeat", "step", "steps", "started_unix", "updated_unix")):
        return None
    return hb


def fresh(hb: dict[str, Any] | None, now: float | None = None) -> bool:
    """Whether rank 0 wrote the heartbeat within STALE_S (its loop may have ended since)."""
    return hb is not None and (time.time() if now is None else now) - float(hb["updated_unix"]) <= STALE_S


def live(hb: dict[str, Any] | None, now: float | None = None) -> bool:
    """Whether the heartbeat says a repeat is training now: fresh, and not done."""
    return hb is not None and hb.get("phase") != "done" and fresh(hb, now)


def eta_s(hb: dict[str, Any], repeats: int) -> float | None:
    """Seconds until the point's last repeat ends, at the rate of this repeat's steps so far:
    (steps left in this repeat + steps x repeats after it) x seconds per step done. The ranks'
    start-up between repeats is not counted. None before the first step is done."""
    done = int(hb["step"])
    if done <= 0:
        return None
    per_step = (float(hb["updated_unix"]) - float(hb["started_unix"])) / done
    left = int(hb["steps"]) - done + int(hb["steps"]) * max(0, repeats - int(hb["repeat"]) - 1)
    return max(0, left) * per_step


def clock(seconds: float) -> str:
    """3725 -> '1:02:05', 312 -> '5:12'."""
    s = int(round(seconds))
    h, m = divmod(s // 60, 60)
    return f"{h}:{m:02d}:{s % 60:02d}" if h else f"{m}:{s % 60:02d}"


def running_line(hb: dict[str, Any], repeats: int) -> str:
    """`launch status`'s detail of a running point: 'running: repeat 4/7, step 52/120'."""
    return f"running: repeat {int(hb['repeat']) + 1}/{repeats}, step {hb['step']}/{hb['steps']}"


def progress_line(hb: dict[str, Any], repeats: int) -> str:
    """The launcher's line: 'repeat 4/7, step 52/120 (timed), 0.41 s/step, ETA 5:12'."""
    eta = eta_s(hb, repeats)
    done = int(hb["step"])
    per_step = (float(hb["updated_unix"]) - float(hb["started_unix"])) / max(1, done)
    rate = f", {per_step:.2f} s/step" if done > 0 else ""
    return (f"repeat {int(hb['repeat']) + 1}/{repeats}, step {done}/{hb['steps']} "
            f"({hb.get('phase')}){rate}, ETA {'?' if eta is None else clock(eta)}")
