"""Results over time: each configuration's throughput in every sweep under a folder.

    python -m analysis history ROOT        (ROOT holds sweeps: ROOT/<sweep>/points/...)

One row per configuration and sweep, oldest first: the sweep's date, the suite commit,
the framework version and device, the median throughput with its min..max over repeats,
and the change against the previous sweep of the same configuration. A change is flagged
(`!`) when it lies beyond the configuration's own spread: the two sweeps' min..max ranges
over repeats do not overlap. With one repeat a range is a single figure, so any change is
flagged; run repeats to learn what is noise. The image column names the container image
(analysis/images.py); a change between sweeps that ran in different images says
`other image`: not the same measurement.
"""
import datetime

import pandas as pd
from tabulate import tabulate

from analysis import images, tables
from analysis.results import CONFIG_COLUMNS

KEY = [c for c in CONFIG_COLUMNS if c != "bench"]
COLUMNS = ["date", "sweep", "suite_commit", "framework_version", "device", "image", "throughput",
           "tp_min", "tp_max", "change", "beyond_spread", "other_image"]


def history(res) -> pd.DataFrame:
    """The table above, from analysis.load of a folder of sweeps (training points)."""
    pts = res.points[(res.points.bench == "train") & res.points.throughput.notna()].copy()
    if pts.empty:
        return pd.DataFrame(columns=KEY + COLUMNS)
    made = {key: m.get("created_unix") for key, m in res.manifests.items()}
    commit = {key: m.get("suite_commit") for key, m in res.manifests.items()}
    pts["created"] = [made.get((s, p)) for s, p in zip(pts.sweep, pts.point)]
    pts["suite_commit"] = [commit.get((s, p)) for s, p in zip(pts.sweep, pts.point)]
    # What ran, from the rank records (environments carry the sweep; runs name points only).
    seen = {}
    for e in res.environments:
        got = seen.setdefault((e["sweep"], e["point"]), ({}, {}))
        got[0][str((e.get("framework") or {}).get("version"))] = 1
        got[1][str((e.get("environment") or {}).get("device"))] = 1
    pts["framework_version"] = [",".join(sorted(seen.get((s, p), ({}, {}))[0])) or None
                                for s, p in zip(pts.sweep, pts.point)]
    pts["device"] = [",".join(sorted(seen.get((s, p), ({}, {}))[1])) or None
                     for s, p in zip(pts.sweep, pts.point)]
    ran_in = images.of_points(res)
    pts["image"] = [ran_in.get((s, p)) for s, p in zip(pts.sweep, pts.point)]
    # A sweep's date: its first point's creation; the folder name where none is recorded.
    first = pts.groupby("sweep").created.min()
    pts["order"] = [first.get(s) if pd.notna(first.get(s)) else float("inf") for s in pts.sweep]
    pts["date"] = [datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
                   if t != float("inf") else "" for t in pts.order]
    pts = pts.sort_values(["order", "sweep"], kind="stable")
    rows = []
    for _, g in pts.groupby(KEY, dropna=False, sort=False):
        prev = None
        for r in g.itertuples():
            change = beyond = other = None
            if prev is not None:
                change = r.throughput / prev.throughput - 1
                beyond = r.tp_min > prev.tp_max or r.tp_max < prev.tp_min
                other = images.identity(r.image) != images.identity(prev.image)
            rows.append({**{k: getattr(r, k) for k in KEY}, "date": r.date, "sweep": r.sweep,
                         "suite_commit": r.suite_commit, "framework_version": r.framework_version,
                         "device": r.device, "image": images.label(r.image) if r.image else None,
                         "throughput": r.throughput, "tp_min": r.tp_min, "tp_max": r.tp_max,
                         "change": change, "beyond_spread": beyond, "other_image": other})
            prev = r
    return pd.DataFrame(rows, columns=KEY + COLUMNS)


def render(table: pd.DataFrame) -> str:
    if table.empty:
        return "no training point with a throughput under this folder"
    parts = ["# Throughput over time (samples/s, median of ok repeats; `!`: beyond the spread)"]
    shown = table.image.notna().any()  # the image column where any point ran in a container
    for key, g in table.groupby(KEY, dropna=False, sort=False):
        cfg = dict(zip(KEY, key))
        title = (f"{cfg['framework']} {cfg['model']} ({cfg['model_size']}) {cfg['precision']} "
                 f"{tables.allocation(cfg['nodes'], cfg['gpus_per_node'])} bs{cfg['batch_size']}"
                 + (" compile" if cfg["compile"] is True else ""))
        rows = [[r.date, r.sweep, (r.suite_commit or "")[:12], r.framework_version, r.device,
                 *([r.image or "none"] if shown else []),
                 f"{r.throughput:.1f} ({r.tp_min:.1f}..{r.tp_max:.1f})",
                 "" if tables.missing(r.change) else f"{r.change:+.1%}" + (" !" if r.beyond_spread else "")
                 + ("; other image" if r.other_image else "")]
                for r in g.itertuples()]
        parts.append(f"## {title}\n" + tabulate(
            rows, headers=["date", "sweep", "commit", "framework", "device", *(["image"] if shown else []),
                           "throughput (min..max)", "change"], tablefmt="github", disable_numparse=True))
    return "\n\n".join(parts)
