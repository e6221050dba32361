"""Records on disk -> tidy DataFrames: points, runs (one per repeat) and steps.

Works on partial sweeps: a point with fewer recorded repeats than asked is
`partial` or `missing`, never dropped. A file that cannot be read as a record
of a known schema stops the load with a RecordError naming it.
"""
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analysis import method
from frameworks.common import records, statuses

REPEAT_DIR = re.compile(r"^repeat-(\d+)$")  # interrupted attempts (repeat-NN.interrupted-T) are skipped
CONFIG_COLUMNS = ["bench", "framework", "model", "model_size", "precision", "amp_dtype",
                  "compile", "batch_size", "nodes", "gpus_per_node", "devices"]


class RecordError(ValueError):
    """A results file that is missing, unreadable or of an unknown schema."""


@dataclass
class Results:
    points: pd.DataFrame   # one row per sweep point, with the method's summary
    runs: pd.DataFrame     # one row per recorded repeat
    steps: pd.DataFrame    # one row per rank per step
    root: str


def read_json(path, schema: str) -> dict:
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as exc:
        raise RecordError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise RecordError(f"corrupt record file {path}: {exc}") from None
    if not isinstance(data, dict) or data.get("schema") != schema:
        raise RecordError(f"corrupt record file {path}: not a {schema} record")
    if not isinstance(data.get("version"), int) or data["version"] > records.SCHEMA_VERSION:
        raise RecordError(f"{path}: {schema} version {data.get('version')!r} is newer than this "
                          f"analysis (knows {records.SCHEMA_VERSION})")
    return data


def find_points(root) -> list:
    root = Path(root)
    if not root.is_dir():
        raise RecordError(f"no results folder at {root}")
    found = sorted(root.glob("**/points/*/point.json"))
    if not found:
        raise RecordError(f"no sweep points under {root} (expected SWEEP/points/*/point.json)")
    return found


def point_row(point: dict, pdir: Path) -> dict:
    return {"sweep": str(pdir.parent.parent), "point": point["point"],
            "bench": point.get("bench", "train"), "framework": point["framework"]["name"],
            "model": point["model"]["name"], "model_size": point["model"].get("size"),
            "precision": point["precision"], "amp_dtype": point.get("amp_dtype"),
            "compile": point["compile"], "batch_size": point["batch_size"],
            "nodes": point["nodes"], "gpus_per_node": point["gpus_per_node"],
            "devices": point["world_size"], "repeats": point["repeats"]}


def load_repeat(rdir: Path, point: dict, repeat: int, steps_out: list) -> dict:
    world = point["world_size"]
    ranks = {}
    for path in sorted(rdir.glob("rank-*.json")):
        rec = read_json(path, records.RECORD_SCHEMA)
        ranks[rec["rank"]] = rec
    run_file = rdir / "run.json"
    if run_file.exists():
        run = read_json(run_file, records.RUN_SCHEMA)
        status, error, tail = run["status"], run["error"], run.get("log_tail")
    elif len(ranks) == world:  # the driver died after its ranks finished
        (status, error), tail = statuses.run_status(ranks, world), None
    else:
        status, error, tail = "incomplete", "repeat not finished (no run.json)", None
    row = {"point": point["point"], "repeat": repeat, "status": status, "error": error,
           "log_tail": tail,
           "ranks_recorded": len(ranks), "throughput": None, "window_s": None, "samples": None}
    if status == "ok" and point.get("bench", "train") == "train":  # comm: analysis/comm.py
        timings = [method.rank_timing(ranks[r]) for r in sorted(ranks)]
        row["samples"] = sum(s for s, _ in timings)
        row["window_s"] = max(w for _, w in timings)
        row["throughput"] = method.repeat_throughput(ranks[r] for r in sorted(ranks))
    any_rank = next(iter(ranks.values()), None)
    if any_rank:
        row["framework_version"] = any_rank["framework"]["version"]
        row["device"] = any_rank["environment"].get("device")
        row["hosts"] = ",".join(sorted({r["host"] for r in ranks.values()}))
        peaks = [r["memory"]["peak_device_bytes"] for r in ranks.values()
                 if r["memory"].get("peak_device_bytes") is not None]
        row["peak_device_bytes"] = max(peaks) if peaks else None
        row["peak_host_bytes"] = max((r["memory"].get("peak_host_bytes") or 0) for r in ranks.values())
    for rank, rec in ranks.items():
        for s in rec["steps"]:
            steps_out.append({"point": point["point"], "repeat": repeat, "rank": rank,
                              "host": rec["host"], **s, "duration": s["end"] - s["start"]})
    return row


def summarize_point(row: dict, runs: list) -> dict:
    n_ok = sum(r["status"] == "ok" for r in runs)
    # comm repeats have no training throughput: their figures are analysis/comm.py's
    s = method.summarize(r["throughput"] for r in runs
                         if r["status"] == "ok" and r["throughput"] is not None)
    row.update(throughput=s["median"], tp_min=s["min"], tp_max=s["max"], tp_cv=s["cv"],
               n_ok=n_ok, n_recorded=len(runs))
    row["status"] = statuses.point_status((r["status"] for r in runs), row["repeats"])
    bad = next((r for r in runs if r["status"] != "ok" and r["error"]), None)
    row["error"] = bad["error"] if bad else None
    row["peak_device_bytes"] = max((r.get("peak_device_bytes") or 0 for r in runs), default=0) or None
    return row


def add_speedup(points: pd.DataFrame) -> pd.DataFrame:
    """Speedup over the 1-device point of the same configuration, and efficiency."""
    key = [c for c in CONFIG_COLUMNS if c not in ("nodes", "gpus_per_node", "devices")]
    config = [tuple(str(v) for v in row) for row in points[key].itertuples(index=False)]
    base = {}
    for cfg, devices, tp in zip(config, points.devices, points.throughput):
        if devices == 1 and not _nan(tp):
            base.setdefault(cfg, []).append(tp)
    base = {cfg: method.summarize(v)["median"] for cfg, v in base.items()}
    points = points.copy()
    points["speedup"] = [None if _nan(tp) else method.speedup(tp, base.get(cfg))
                         for cfg, tp in zip(config, points.throughput)]
    points["efficiency"] = [method.efficiency(s, d) for s, d in zip(points.speedup, points.devices)]
    return points


def _nan(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def load(path) -> Results:
    """Every sweep point under `path` (a sweep folder or a folder of sweeps)."""
    point_rows, run_rows, step_rows = [], [], []
    for point_file in find_points(path):
        point = read_json(point_file, "dlbench.point")
        pdir = point_file.parent
        runs = []
        for entry in sorted(os.listdir(pdir)):
            m = REPEAT_DIR.match(entry)
            if m and (pdir / entry).is_dir():
                runs.append(load_repeat(pdir / entry, point, int(m.group(1)), step_rows))
        run_rows += runs
        point_rows.append(summarize_point(point_row(point, pdir), runs))
    points = add_speedup(pd.DataFrame(point_rows))
    return Results(points=points, runs=pd.DataFrame(run_rows), steps=pd.DataFrame(step_rows),
                   root=str(path))
