"""The report's grids, written once: per model, rows = framework / precision / batch size /
compile, columns = nodes x devices per node, cells = one figure of each point, formatted.
Points that failed or have not run show their status (LABELS), never a blank; a partial
point's figure carries `*`, and a flagged figure its marks (analysis/figures/method.py, MARKS).
And what every section formats with: a figure or "n/a" (`number`, `missing`), a fraction as
a percentage (`percent`: every MFU), bytes in
GiB (`gib`) or in words (`human_bytes`), an allocation and a layout (`allocation`,
`layout_label`), a table of text by the thousand rows (`github`).

A leaf of the analysis: it imports no other analysis module, so every layer builds on it
(the order: tests/unit/test_analysis_imports.py).
"""
import math

import pandas as pd
from tabulate import tabulate

ROW_KEY = ["framework", "precision", "batch_size", "compile"]
HEADERS = ["framework", "precision", "batch/dev", "mode"]
LABELS = {"failed": "FAILED", "oom": "OOM", "timeout": "TIMEOUT", "cancelled": "CANCELLED",
          "unsupported": "UNSUPPORTED", "missing": "missing", "incomplete": "running?",
          "corrupt": "CORRUPT", "unhealthy": "UNHEALTHY",
          # a checkpoint's storage (contract/statuses.py STORAGE; docs/checkpoint.md)
          "disk_full": "DISK_FULL", "unwritable": "UNWRITABLE", "missing_shard": "MISSING_SHARD"}


def label(status) -> str:
    """A status as the tables show it: FAILED, OOM, ..., or the status itself."""
    return LABELS.get(status, status)


def allocation(nodes, gpus_per_node) -> str:
    """A point's allocation as the tables name it: "NxG", nodes x devices per node (the
    parallel layout inside it is contract/parallel.py's)."""
    return f"{nodes}x{gpus_per_node}"


def layout_label(lay: dict) -> str:
    """A parallel layout (a point.json's `parallel`) as the tables name it, 'dp4 x cp2, fsdp':
    the grid's sizes above 1 (dp always; ep, which borrows a stage's ranks, last), then fsdp
    and the schedule."""
    sizes = [f"dp{lay.get('dp', 1)}"] + [f"{k}{lay[k]}" for k in ("tp", "pp", "cp", "ep") if lay.get(k, 1) > 1]
    extra = ["fsdp"] * bool(lay.get("fsdp")) + ["sp"] * bool(lay.get("sequence_parallel") and lay.get("tp", 1) > 1)
    if lay.get("pp", 1) > 1:
        interleaved = lay.get("schedule") == "interleaved_1f1b"
        extra.append(lay.get("schedule", "") + (f" v{lay['virtual_stages']}" if interleaved else ""))
    return " x ".join(sizes) + (", " + ", ".join(extra) if extra else "")


def allocation_columns(points: pd.DataFrame) -> list:
    """The grid's columns, one per allocation ("NxG"), by devices then nodes."""
    cols = (points[["nodes", "gpus_per_node", "devices"]].drop_duplicates()
            .sort_values(["devices", "nodes"]))
    return [allocation(n, g) for n, g in zip(cols.nodes, cols.gpus_per_node)]


def missing(value) -> bool:
    """Whether a figure is not there: None or NaN."""
    return value is None or (not isinstance(value, str) and pd.isna(value))


def number(value, spec: str, empty: str = "n/a") -> str:
    """A figure formatted by `spec`, or `empty` where there is none (None or NaN)."""
    return empty if missing(value) else format(value, spec)


def percent(value, empty: str = "n/a") -> str:
    """A fraction as a percentage, the one rule for every MFU the suite shows: one decimal
    from 1% up (0.117 -> "11.7%"), two significant figures under it (0.0042 -> "0.42%",
    0.000123 -> "0.012%"), so that a small figure never reads "0.0%"; `empty` where none."""
    if missing(value):
        return empty
    pct = float(value) * 100
    if pct == 0 or abs(pct) >= 1:
        return f"{pct:.1f}%"
    decimals = 1 - math.floor(math.log10(abs(pct)))     # the first two significant digits
    text = f"{pct:.{decimals}f}"
    return f"{pct:.1f}%" if abs(float(text)) >= 1 else f"{text}%"   # 0.996 rounds up to 1.0%


GIB = 1 << 30


def gib(n_bytes):
    """Bytes (a number or a column) in GiB."""
    return n_bytes / GIB


def human_bytes(n) -> str:
    """1048576 -> "1 MiB"; a size that is no whole number of its unit gets a "~"."""
    n = int(n)
    if n <= 0:
        return f"{n} B"
    for unit, size in (("GiB", GIB), ("MiB", GIB >> 10), ("KiB", GIB >> 20)):
        if n % size == 0:
            return f"{n // size} {unit}"
        if n >= size * 0.99:  # 1048572 (1 MiB in whole chunks of 3 ranks) reads "~1 MiB"
            return f"~{n / size:.3g} {unit}"
    return f"{n} B"


def cell(row, column: str, fmt, marks: str | None = None) -> str:
    """One point's cell: its status label, "n/a", or the figure formatted (`fmt`: a format
    spec, or a function of the row that returns the text) with "*" when the point is
    partial and, after a space, the marks of the row's column `marks` when it names one."""
    if row.status in LABELS:
        return LABELS[row.status]
    value = getattr(row, column)
    if missing(value):
        return "n/a"
    text = fmt(row) if callable(fmt) else format(value, fmt)
    text += "*" if row.status == "partial" else ""
    flags = getattr(row, marks, None) if marks else None
    return f"{text} {flags}" if isinstance(flags, str) and flags else text


def mode_of(row) -> str:
    """The mode that ran (records since compile=auto name it), else compile on/off."""
    mode = getattr(row, "mode", None)
    return mode if isinstance(mode, str) and mode else ("compile on" if row.compile else "compile off")


def interval(row) -> str:
    """The median's 95% interval, lo..hi; (min..max) where fewer repeats give none."""
    if not missing(row.ci_lo):
        return f"{row.ci_lo:.1f}..{row.ci_hi:.1f}"
    return f"({row.tp_min:.1f}..{row.tp_max:.1f})"


def _flag(value) -> bool:
    return not missing(value) and bool(value)


def energy(row) -> str:
    """The timed window's joules per sample, per token ("/token") for a language model, and
    "(short)" where a window was too short for NVML's counter (contract/energy.py)."""
    per_token = not missing(getattr(row, "energy_per_token_j", None))
    return (format(row.energy, ".3g") + (" /token" if per_token else "")
            + (" (short)" if _flag(getattr(row, "energy_too_short", None)) else ""))


def power(row) -> str:
    return format(row.power_per_device_w, ".0f") + (
        " (short)" if _flag(getattr(row, "energy_too_short", None)) else "")


# The one table per model (report.html): a row per configuration and device count.
# (key, heading, format: a spec, or a function of the row)
ONE_TABLE = (("throughput", "samples/s", ".1f"), ("interval", "95% interval", interval),
             ("speedup", "speedup", ".2f"), ("efficiency", "efficiency", ".0%"),
             ("tflops_per_device", "TFLOP/s per device", ".3g"), ("mfu", "MFU", lambda r: percent(r.mfu)),
             ("energy", "J per sample", energy), ("power_per_device_w", "W per device", power),
             ("memory", "peak memory per rank (GiB)", ".2f"))
ONE_TABLE_LABELS = ("framework", "precision", "batch/dev", "mode", "nodes x dev")


def one_table(points: pd.DataFrame) -> list:
    """One model's points as rows of the one table: dicts with `labels` (ONE_TABLE_LABELS),
    `cells` (ONE_TABLE's, formatted: "" where a point has no figure, "n/a" where a figure
    is unknown), `status`, `error` (why it has no figure, or its first bad repeat's),
    `partial` and `marks` (its flags, the speedup's B included), by configuration and
    device count."""
    per_sample = points.get("energy_per_sample_j", pd.Series(None, index=points.index, dtype=object))
    per_token = points.get("energy_per_token_j", pd.Series(None, index=points.index, dtype=object))
    pts = points.assign(memory=gib(points.peak_device_bytes),
                        energy=[s if missing(t) else t for s, t in zip(per_sample, per_token)])
    if "power_per_device_w" not in pts:   # points not made by analysis.load
        pts = pts.assign(power_per_device_w=None)
    order = sorted(pts.itertuples(), key=lambda r: (
        str(r.framework), str(r.precision), int(r.batch_size), mode_of(r), int(r.devices),
        int(r.nodes), str(r.sweep)))
    rows = []
    for r in order:
        bad = r.status in LABELS
        cells = {}
        for key, _, fmt in ONE_TABLE:
            value = getattr(r, key, None)
            if bad:
                cells[key] = ""
            elif key != "interval" and missing(value):
                cells[key] = "n/a" if key != "memory" else "-"
            elif key == "interval" and missing(r.throughput):
                cells[key] = "n/a"
            else:
                cells[key] = fmt(r) if callable(fmt) else format(value, fmt)
        marks = "".join(m if isinstance(m, str) else "" for m in (r.marks, r.speedup_marks))
        rows.append({"labels": [str(r.framework), str(r.precision), str(r.batch_size), mode_of(r),
                                allocation(r.nodes, r.gpus_per_node)],
                     "cells": cells, "status": str(r.status),
                     "error": r.error if isinstance(r.error, str) else None,
                     "partial": r.status == "partial",
                     "marks": "".join(dict.fromkeys(marks)), "sweep": str(r.sweep)})
    return rows


def table(points: pd.DataFrame, column: str, fmt, marks: str | None = None) -> str:
    """One model's points as a grid of `column`, formatted with `fmt` (see `cell`)."""
    columns = allocation_columns(points)
    grid: dict = {}
    for row in points.itertuples():
        key = tuple(getattr(row, k) for k in ROW_KEY[:3]) + (mode_of(row),)
        grid.setdefault(key, {})[allocation(row.nodes, row.gpus_per_node)] = cell(row, column, fmt, marks)
    rows = []
    for key in sorted(grid, key=lambda k: tuple(str(x) for x in k)):
        fw, prec, bs, comp = key
        rows.append([fw, prec, bs, comp] + [grid[key].get(c, "-") for c in columns])
    return tabulate(rows, headers=HEADERS + columns, tablefmt="github", disable_numparse=True)


def github(rows, headers) -> str:
    """tabulate(rows, headers, tablefmt="github", disable_numparse=True), the same text, for
    rows of text by the thousand: tabulate strips ANSI codes from every cell to guess its
    type (5 us a cell), a third of `analysis history` over 10,000 stored points
    (benchmarks/results_store.md). None is "", as tabulate shows it."""
    rows = [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max([len(h) + 2] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"
    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|",
                      *map(line, rows)])
