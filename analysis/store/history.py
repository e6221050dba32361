"""Results over time: each configuration's throughput in every sweep of the results store,
or under a folder.

    python -m analysis history [--where framework=pytorch model=resnet50] [--since 2026-10-01]
                               [--sweep NAME] [--store PATH_OR_URL]     every sweep stored
    python -m analysis history ROOT [--where ...]  the sweeps under ROOT (ROOT/<sweep>/points/...),
                                                   read from their folders; nothing stored

One row per configuration and sweep, oldest first: the sweep's date, the suite commit,
the framework version and device, the median throughput with its min..max over repeats,
and the change against the previous sweep of the same configuration. A change is flagged
(`!`) when it lies beyond the configuration's own spread: the two sweeps' min..max ranges
over repeats do not overlap. With one repeat a range is a single figure, so any change is
flagged; run repeats to learn what is noise. The image column names the container image
(analysis/read/images.py); a change between sweeps that ran in different images says
`other image`: not the same measurement.

Certifications (`python -m launch certify`, certify/) come first, one row each, oldest first:
date, suite, verdict, how many items passed, failed, were measured without a baseline or not
run, the baseline and threshold, the system and the folder (`certifications`).
"""
import datetime
import os
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from analysis import tables
from analysis.figures.points import CONFIG_COLUMNS
from analysis.read import images
from analysis.read.record_file import RecordError
from analysis.read.results import Results

Row = dict[str, Any]   # a certification's row, or a table's as a record: values of any kind
Certifications = pd.DataFrame | Iterable[Row]   # the store's frame, or store_rows.certifications'

KEY = [c for c in CONFIG_COLUMNS if c != "bench"]
COLUMNS = ["date", "sweep", "suite_commit", "framework_version", "device", "image", "throughput",
           "tp_min", "tp_max", "change", "beyond_spread", "other_image"]


def points_of(res: Results) -> pd.DataFrame:
    """The training points of analysis.load's results with what the history shows of each:
    KEY, sweep, created (the sweep's date: its first point's creation), suite_commit,
    framework_version, device, image (its label) and image_id (what tells images apart),
    throughput, tp_min, tp_max."""
    pts: pd.DataFrame = res.points[(res.points.bench == "train") & res.points.throughput.notna()].copy()
    made = {key: m.get("created_unix") for key, m in res.manifests.items()}
    commit = {key: m.get("suite_commit") for key, m in res.manifests.items()}
    pts["created"] = [made.get((s, p)) for s, p in zip(pts.sweep, pts.point)]
    pts["suite_commit"] = [commit.get((s, p)) for s, p in zip(pts.sweep, pts.point)]
    # What ran, from the rank records (environments carry the sweep; runs name points only).
    seen: dict[tuple[str, str], tuple[dict[str, int], dict[str, int]]] = {}
    for e in res.environments:
        got = seen.setdefault((e["sweep"], e["point"]), ({}, {}))
        got[0][str((e.get("framework") or {}).get("version"))] = 1
        got[1][str((e.get("environment") or {}).get("device"))] = 1
    pts["framework_version"] = [",".join(sorted(seen.get((s, p), ({}, {}))[0])) or None
                                for s, p in zip(pts.sweep, pts.point)]
    pts["device"] = [",".join(sorted(seen.get((s, p), ({}, {}))[1])) or None
                     for s, p in zip(pts.sweep, pts.point)]
    ran_in = images.of_points(res)
    boxes = [ran_in.get((s, p)) for s, p in zip(pts.sweep, pts.point)]
    pts["image"] = [images.label(c) if c else None for c in boxes]
    pts["image_id"] = [images.identity(c) for c in boxes]
    if len(pts):   # a sweep's date: its first point's creation
        pts["created"] = pts.groupby("sweep").created.transform("min")
    return pts


# what stored_points reads of the store (and the --where keys)
STORED = KEY + ["bench", "point", "suite_commit", "framework_version", "device", "image",
                "image_digest", "image_runtime", "throughput", "tp_min", "tp_max"]


def stored_points(frame: pd.DataFrame) -> pd.DataFrame:
    """The same from the results store's points (analysis/store/database.py `Store.points`, at
    least the columns STORED)."""
    if not len(frame):
        return _empty(KEY + ["sweep", "created", "bench"] + COLUMNS[2:])
    pts = frame[(frame.bench == "train") & frame.throughput.notna()].copy()
    out: pd.DataFrame = pts.assign(
        created=pts.sweep_created,
        image=[images.label({"image": i, "digest": d, "runtime": r}) if i else None
               for i, d, r in zip(pts.image, pts.image_digest, pts.image_runtime)],
        image_id=[d or i or None for i, d in zip(pts.image, pts.image_digest)])
    return out


def history(res: Results) -> pd.DataFrame:
    """The table above, from analysis.load of a folder of sweeps (training points)."""
    return table(points_of(res))


def table(pts: pd.DataFrame) -> pd.DataFrame:
    """The table above, from points_of's (or stored_points') rows."""
    if pts.empty:
        return _empty(KEY + COLUMNS)
    pts = pts.copy()
    pts["order"] = [t if pd.notna(t) else float("inf") for t in pts.created]
    pts["date"] = [table_date(t) for t in pts.order]
    pts = pts.sort_values(["order", "sweep"], kind="stable")
    # each configuration's sweeps together (configurations in order of their first sweep),
    # oldest first, each against the one before it
    groups = pts.groupby(KEY, dropna=False, sort=False)
    pts["group"] = groups.ngroup()
    pts["image_id"] = pts.image_id.fillna("")   # outside a container: "" (so equal to "")
    prev = groups[["throughput", "tp_min", "tp_max", "image_id"]].shift()
    pts["change"] = pts.throughput / prev.throughput - 1
    pts["beyond_spread"] = ((pts.tp_min > prev.tp_max) | (pts.tp_max < prev.tp_min)).where(
        prev.throughput.notna(), None)
    pts["other_image"] = (pts.image_id != prev.image_id).where(prev.throughput.notna(), None)
    pts = pts.sort_values("group", kind="stable")
    out: pd.DataFrame = pts[KEY + COLUMNS].reset_index(drop=True)
    return out


def _empty(columns: list[str]) -> pd.DataFrame:
    # The frames here are typed where they are made or returned: pandas-stubs needs Python 3.11
    # (typing.Self), so under mypy's python_version 3.10 its constructors and methods are Any.
    frame: pd.DataFrame = pd.DataFrame(columns=columns)
    return frame


def table_date(t: object) -> str:
    """A sweep's date as the history shows it (UTC), "" where it is not known."""
    if not isinstance(t, (int, float)) or t != t or t == float("inf"):
        return ""
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")


def select(pts: pd.DataFrame, where: Mapping[str, str] | None = None, since: object = None,
           sweep: object = None) -> pd.DataFrame:
    """The points whose columns equal `where`'s values (given as text: compared as the
    column's type), of sweeps dated `since` or later (a date, UTC, as the history shows
    them), of the sweep `sweep` (its name, or path; in a store also its key or archive)."""
    for key, text in (where or {}).items():
        if key not in pts.columns:
            raise RecordError(f"--where {key}: no such column (valid: "
                              f"{', '.join(c for c in pts.columns if not c.startswith('sweep_'))})")
        pts = pts[_equal(pts[key], key, text)]
    if since is not None:
        pts = pts[pts.created.notna() & (pts.created >= since_unix(since))]
    if sweep is not None:
        full = os.path.abspath(str(sweep))
        hit = pd.Series(False, index=pts.index)
        for c in ("sweep", "sweep_key", "sweep_path", "sweep_archive"):
            if c in pts.columns:
                col = pts[c].map(lambda v: os.path.normpath(v) if isinstance(v, str) else "")
                hit |= (col == str(sweep)) | (col == full) | (col.map(os.path.basename) == str(sweep))
        pts = pts[hit]
    return pts


def _equal(col: pd.Series, key: str, text: str) -> pd.Series:
    values = col.dropna()
    try:
        if len(values) and all(isinstance(v, (bool, np.bool_)) for v in values):
            if text.lower() not in ("true", "false", "1", "0"):
                raise ValueError(text)
            return col.map(lambda v: v is not None and v == v and bool(v) == (text.lower() in ("true", "1")))
        if len(values) and pd.api.types.is_numeric_dtype(values.infer_objects()):
            return pd.to_numeric(col, errors="coerce") == float(text)
    except ValueError:
        raise RecordError(f"--where {key}={text}: {key} holds {values.iloc[0]!r}-like values") from None
    return col.astype(str) == text


def since_unix(since: object) -> float:
    """A date (2026-10-01, 2026-10-01T12:00; UTC unless it says) as Unix time."""
    try:
        when = datetime.datetime.fromisoformat(str(since))
    except ValueError:
        raise RecordError(f"--since {since}: not a date (2026-10-01 or 2026-10-01T12:00)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return when.timestamp()


def render(table: pd.DataFrame) -> str:
    if table.empty:
        return "no training point with a throughput here"
    parts = ["# Throughput over time (samples/s, median of ok repeats; `!`: beyond the spread)"]
    shown = table.image.notna().any()  # the image column where any point ran in a container
    # table() put each configuration's rows together: one pass over plain records
    groups: dict[tuple[str, ...], tuple[dict[Hashable, Any], list[list[object]]]] = {}
    for r in table.to_dict("records"):
        groups.setdefault(tuple(str(r[k]) for k in KEY), (r, []))[1].append(
            [r["date"], r["sweep"], (r["suite_commit"] or "")[:12], r["framework_version"],
             r["device"], *([r["image"] or "none"] if shown else []),
             f"{r['throughput']:.1f} ({r['tp_min']:.1f}..{r['tp_max']:.1f})",
             "" if tables.missing(r["change"]) else f"{r['change']:+.1%}"
             + (" !" if r["beyond_spread"] else "") + ("; other image" if r["other_image"] is True else "")])
    for cfg, rows in groups.values():
        title = (f"{cfg['framework']} {cfg['model']} ({cfg['model_size']}) {cfg['precision']} "
                 f"{tables.allocation(cfg['nodes'], cfg['gpus_per_node'])} bs{cfg['batch_size']}"
                 + (" compile" if cfg["compile"] is True else ""))
        parts.append(f"## {title}\n" + tables.github(
            rows, ["date", "sweep", "commit", "framework", "device", *(["image"] if shown else []),
                   "throughput (min..max)", "change"]))
    return "\n\n".join(parts)


def certifications(rows: Certifications, since: object = None) -> list[Row]:
    """The certifications shown, oldest first: store_rows.certifications' rows, or the
    store's (analysis/store/database.py `Store.certifications`, a DataFrame), dated `since`
    or later."""
    shown = [{str(k): v for k, v in r.items()} for r in rows.to_dict("records")] \
        if isinstance(rows, pd.DataFrame) else list(rows)   # its columns' names are text
    if since is not None:
        shown = [r for r in shown if not tables.missing(r.get("created_unix"))
                 and r["created_unix"] >= since_unix(since)]
    return sorted(shown, key=lambda r: (r.get("created_unix") or 0, r.get("name") or ""))


def render_certifications(rows: list[Row]) -> str:
    """The certifications' table ("" when there is none)."""
    if not rows:
        return ""
    def where(r: Row) -> str:
        return r.get("archive") or r.get("path") or r.get("label") or ""
    table = [[table_date(r.get("created_unix")), r.get("suite"), r.get("verdict"),
              f"{r.get('passed') or 0}/{r.get('failed') or 0}/{r.get('measured') or 0}/"
              f"{r.get('not_run') or 0}", r.get("baseline"),
              "" if tables.missing(r.get("threshold")) else f"{r['threshold']:g}",
              f"{tables.allocation(r.get('nodes'), r.get('gpus_per_node'))} {r.get('cluster') or ''}".strip(),
              where(r)] for r in rows]
    return "# Certifications (pass/fail/measured/not run: items; docs/certify.md)\n" + tables.github(
        table, ["date", "suite", "verdict", "items", "baseline", "threshold", "system", "folder"])
