"""DLPerf-style tables: per model, rows = framework / precision / batch size (/ compile),
columns = nodes x devices per node, cells = the method's figures. Points that
failed or have not run are shown as such, never dropped."""
import pandas as pd
from tabulate import tabulate

from analysis import environment, special
from frameworks.common import layout

ROW_KEY = ["framework", "precision", "batch_size", "compile"]
LABELS = {"failed": "FAILED", "oom": "OOM", "timeout": "TIMEOUT", "cancelled": "CANCELLED",
          "unsupported": "UNSUPPORTED", "missing": "missing", "incomplete": "running?",
          "corrupt": "CORRUPT"}


def _layout(points: pd.DataFrame):
    cols = (points[["nodes", "gpus_per_node", "devices"]].drop_duplicates()
            .sort_values(["devices", "nodes"]))
    return [f"{n}x{g}" for n, g in zip(cols.nodes, cols.gpus_per_node)]


def _cell(row, column: str, fmt: str) -> str:
    if row.status in LABELS:
        return LABELS[row.status]
    value = getattr(row, column)
    if value is None or pd.isna(value):
        return "n/a"
    text = format(value, fmt)
    return text + ("*" if row.status == "partial" else "")


def table(points: pd.DataFrame, column: str, fmt: str) -> str:
    """One model's points as a grid of `column`, formatted with `fmt`."""
    layout = _layout(points)
    grid = {}
    for row in points.itertuples():
        key = tuple(getattr(row, k) for k in ROW_KEY)
        grid.setdefault(key, {})[f"{row.nodes}x{row.gpus_per_node}"] = _cell(row, column, fmt)
    rows = []
    for key in sorted(grid, key=lambda k: tuple(str(x) for x in k)):
        fw, prec, bs, comp = key
        rows.append([fw, prec, bs, "on" if comp else "off"] + [grid[key].get(c, "-") for c in layout])
    return tabulate(rows, headers=["framework", "precision", "batch/dev", "compile"] + layout,
                    tablefmt="github", disable_numparse=True)


SECTIONS = (("Throughput (samples/s, median of ok repeats)", "throughput", ".1f"),
            ("Speedup over 1 device", "speedup", ".2f"),
            ("Scaling efficiency (speedup / devices)", "efficiency", ".0%"),
            ("Spread across repeats (coefficient of variation)", "tp_cv", ".1%"))


def amp_ratio(points: pd.DataFrame):
    """AMP throughput over FP32 throughput for each configuration both ran, or None."""
    key = ["framework", "batch_size", "compile", "nodes", "gpus_per_node", "devices"]
    # (one figure per configuration: points of several sweeps may share one)
    fp32 = points[points.precision == "fp32"].groupby(key, sort=False).throughput.first()
    amp = points[points.precision == "amp"].groupby(key, sort=False).throughput.first()
    both = fp32.index.intersection(amp.index)
    if both.empty:
        return None
    rows = [{**dict(zip(key, k)), "precision": "amp/fp32", "status": "ok",
             "ratio": amp[k] / fp32[k] if fp32[k] and amp[k] == amp[k] else None} for k in both]
    return table(pd.DataFrame(rows), "ratio", ".2f")


def header(results) -> str:
    runs = results.runs
    lines = [f"# Results: {results.root}"]
    if "framework_version" in runs:
        versions = (runs.dropna(subset=["framework_version"])
                    .merge(results.points[["point", "framework"]], on="point")
                    .groupby("framework")["framework_version"].first())
        lines.append("frameworks: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    if "device" in runs:
        lines.append("devices: " + ", ".join(sorted(runs["device"].dropna().astype(str).unique())))
    p = results.points
    lines.append(f"points: {len(p)} ({(p.status == 'ok').sum()} ok, "
                 f"{(p.status == 'partial').sum()} partial, "
                 f"{(~p.status.isin(['ok', 'partial'])).sum()} without a result)")
    lines.append("\n" + environment.environment_block(results))
    return "\n".join(lines)


def failures(results) -> str:
    bad = results.runs[results.runs.status != "ok"] if len(results.runs) else results.runs
    lines = []
    for r in bad.itertuples():
        lines.append(f"- {r.point} repeat {r.repeat}: {r.status}: {r.error}")
        tail = getattr(r, "log_tail", None)
        if isinstance(tail, dict) and tail.get("lines"):  # the rank's last words, as it left them
            lines.append(f"  rank {tail['rank']}'s log, last {len(tail['lines'])} lines:")
            lines += [f"    {line}" for line in tail["lines"]]
    missing = results.points[results.points.status == "missing"]
    lines += [f"- {r.point}: no repeat recorded" for r in missing.itertuples()]
    corrupt = getattr(results, "corrupt", [])
    if corrupt:  # every one, also those a repeat's error above names
        lines.append(f"Corrupt files ({len(corrupt)}): each costs only its repeat "
                     f"(a {layout.POINT_FILE} its point, a search ledger its search)")
        lines += [f"- {c['file']}: {c['reason']}" for c in corrupt]
    return "\n".join(["## Failed, cut short or missing", *lines]) if lines else ""


def render(results) -> str:
    train = results.points[(results.points.bench == "train")
                           & ~results.points.model.isin(special.OWN_SECTIONS)]  # theirs: below
    parts = [header(results)]
    for model, pts in train.groupby("model", sort=True):
        sizes = ", ".join(sorted(pts.model_size.dropna().unique()))
        parts.append(f"## {model} ({sizes})")
        for title, column, fmt in SECTIONS:
            parts.append(f"### {title}\n{table(pts, column, fmt)}")
        ratio = amp_ratio(pts)
        if ratio is not None:
            parts.append("### AMP over FP32 (throughput ratio)\n" + ratio)
        if pts.peak_device_bytes.notna().any():
            parts.append("### Peak device memory per rank (GiB)\n"
                         + table(pts.assign(mem=pts.peak_device_bytes / 2**30), "mem", ".2f"))
    parts.append(special.render_special(results))
    if (train.status == "partial").any():
        parts.append("`*` some repeats of this point did not finish ok; see below.")
    parts.append(failures(results))
    return "\n\n".join(p for p in parts if p) + "\n"
