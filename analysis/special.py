"""DLPerf's special cases in the report (docs/special.md), and each point's figures.

- Wide & Deep: latency per iteration (ms) and peak memory per rank against the deep
  vocabulary size; OOM is a result, shown as OOM.
- GPT: tokens/s, achieved TFLOP/s per device (analysis/flops.py) and MFU.
- InsightFace: the largest num_classes that trains per ranks x batch (launchers/search.py),
  with every size tried and its outcome.

`metrics(results)` is the table of per-point figures that the report and the regression
gate (analysis/compare.py) both read. Everything here is a function of what analysis.load
read (the points' settings: Results.manifests; the searches: Results.searches).
"""
import pandas as pd
from tabulate import tabulate

from analysis import flops, report  # report imports this module: use report.X at call time

OWN_SECTIONS = ("wide_deep", "insightface")  # left out of the generic tables: see render()
MODEL_KEYS = ("deep_vocab_size", "seq_len", "num_classes")  # what tells a special point apart


def _median(values):
    values = [v for v in values if v is not None and v == v]
    return float(pd.Series(values).median()) if values else None


def metrics(results) -> pd.DataFrame:
    """One row per point: its configuration and figures (None where they do not apply).

    latency_ms = the timed window (longest rank) / timed steps, median over ok repeats;
    timed steps = the repeat's timed samples / (batch x ranks), from the records.
    peak_memory_bytes = the largest rank's peak over ok repeats: device memory where the
    ranks had a device, else host memory (peak RSS)."""
    runs = results.runs
    rows = []
    for p in results.points.itertuples():
        point = results.manifest(p.sweep, p.point)
        model = point.get("model") or {}
        mine = runs[runs.point == p.point] if len(runs) else runs
        ok = mine[mine.status == "ok"] if len(mine) else mine
        per_rank = p.batch_size * p.devices
        latency = _median(r.window_s / (r.samples / per_rank) * 1e3 for r in ok.itertuples()
                          if r.samples)
        device_mem = [v for v in ok.get("peak_device_bytes", []) if v == v and v is not None]
        host_mem = [v for v in ok.get("peak_host_bytes", []) if v == v and v is not None]
        devices = [d for d in mine.get("device", []) if isinstance(d, str)]
        device = devices[0] if devices else None
        search = point.get("search") if isinstance(point.get("search"), dict) else {}
        row = {"point": p.point, "sweep": p.sweep, "status": p.status, "framework": p.framework,
               "model": p.model, "model_size": p.model_size, "precision": p.precision,
               "amp_dtype": p.amp_dtype, "batch_size": p.batch_size, "nodes": p.nodes,
               "gpus_per_node": p.gpus_per_node, "devices": p.devices, "compile": p.compile,
               "device": device, "throughput": p.throughput, "latency_ms": latency,
               "peak_memory_bytes": max(device_mem or host_mem) if (device_mem or host_mem) else None,
               "memory_kind": "device" if device_mem else ("host" if host_mem else None),
               "search": search.get("base"), "search_value": search.get("value"),
               "tokens_per_s": None, "tflops_per_device": None, "peak_tflops": None, "mfu": None}
        row.update({k: model.get(k) for k in MODEL_KEYS})
        if p.model == "gpt" and p.throughput == p.throughput and model.get("seq_len"):
            row["tokens_per_s"] = p.throughput * model["seq_len"]
            row["tflops_per_device"] = flops.achieved_tflops_per_device(
                p.throughput, flops.flops_per_sample(model), p.devices)
            row["peak_tflops"] = flops.peak_tflops(device, p.precision, p.amp_dtype,
                                                   (point.get("config") or {}).get("peak_tflops"))
            row["mfu"] = flops.mfu(row["tflops_per_device"], row["peak_tflops"])
        rows.append(row)
    return pd.DataFrame(rows)


def _label(status) -> str:
    return report.LABELS.get(status, status)


def _count(n) -> str:
    """3200000 -> 3.2M, 10000 -> 10K: column headings of vocabulary sizes."""
    for div, unit in ((10**9, "G"), (10**6, "M"), (10**3, "K")):
        if n >= div:
            return f"{n / div:g}{unit}"
    return str(n)


def wide_deep_section(m: pd.DataFrame) -> str:
    parts = []
    for size, pts in m.groupby("model_size", sort=True, dropna=False):
        vocabs = sorted(int(v) for v in pts.deep_vocab_size.dropna().unique())
        grid = {}
        for r in pts.itertuples():
            key = (r.framework, r.precision, r.batch_size, f"{r.nodes}x{r.gpus_per_node}")
            if r.status in ("ok", "partial") and r.latency_ms is not None:
                mem = (f", {r.peak_memory_bytes / 2**30:.2f} GiB"
                       if r.peak_memory_bytes is not None else "")
                cell = f"{r.latency_ms:.2f} ms{mem}" + ("*" if r.status == "partial" else "")
            else:
                cell = _label(r.status)
            grid.setdefault(key, {})[int(r.deep_vocab_size)] = cell
        rows = [list(k) + [grid[k].get(v, "-") for v in vocabs]
                for k in sorted(grid, key=lambda k: tuple(str(x) for x in k))]
        kinds = sorted(set(pts.memory_kind.dropna()))
        parts.append(f"## wide_deep ({size}): latency per iteration and peak memory per rank\n"
                     f"columns: deep vocabulary size; memory: {' and '.join(kinds) or 'n/a'} "
                     f"(device where ranks had one, else host peak RSS)\n\n"
                     + tabulate(rows, headers=["framework", "precision", "batch/dev", "nodes x dev"]
                                + [_count(v) for v in vocabs], tablefmt="github",
                                disable_numparse=True))
    return "\n\n".join(parts)


def gpt_section(m: pd.DataFrame) -> str:
    parts = []
    for (size, seq), pts in m.groupby(["model_size", "seq_len"], sort=True, dropna=False):
        peaks = sorted({f"{v:g}" for v in pts.peak_tflops.dropna()})
        parts.append(f"## gpt ({size}, seq {int(seq) if seq == seq else '?'}): tokens/s, "
                     "TFLOP/s per device, MFU\n"
                     "FLOPs: Megatron's 72*B*s*l*h^2*(1 + s/(6h) + V/(12*l*h)) per iteration "
                     "(analysis/flops.py); MFU against the device's dense peak "
                     f"({', '.join(peaks) + ' TFLOP/s' if peaks else 'unknown: n/a; set peak_tflops='})")
        for title, column, fmt in (("Tokens/s (samples/s x seq_len)", "tokens_per_s", ".0f"),
                                   ("Achieved TFLOP/s per device", "tflops_per_device", ".3g"),
                                   ("MFU (model FLOPs utilisation)", "mfu", ".1%")):
            parts.append(f"### {title}\n{report.table(pts, column, fmt)}")
    return "\n\n".join(parts)


def insightface_section(m: pd.DataFrame, searches: list) -> str:
    parts = []
    if searches:
        rows = []
        for s in searches:
            tries = ", ".join(f"{t['value']} {'ok' if t['outcome'] == 'ok' else _label(t['outcome'])}"
                              for t in s["tries"])
            note = "" if s.get("done") else " (running or cut short)"
            if s.get("stopped"):
                note = f" (stopped at {s['stopped']})"
            rows.append([s["model"], s["framework"], s["precision"], f"{s['nodes']}x{s['gpus_per_node']}",
                         s["batch_size"], s["key"],
                         "none" if s["largest_ok"] is None else s["largest_ok"],
                         s["smallest_oom"] if s["smallest_oom"] is not None else "-",
                         tries + note])
        parts.append("## Largest size that trains (search, OOM as data)\n"
                     + tabulate(rows, headers=["model", "framework", "precision", "nodes x dev", "batch/dev",
                                               "key", "largest ok", "smallest OOM", "tries in order"],
                                tablefmt="github", disable_numparse=True))
    plain = m[(m.model == "insightface") & m.search.isna()]
    if len(plain):
        classes = sorted(int(v) for v in plain.num_classes.dropna().unique())
        grid = {}
        for r in plain.itertuples():
            key = (r.framework, r.precision, r.batch_size, f"{r.nodes}x{r.gpus_per_node}")
            cell = (f"{r.throughput:.1f}" + ("*" if r.status == "partial" else "")
                    if r.status in ("ok", "partial") else _label(r.status))
            grid.setdefault(key, {})[int(r.num_classes)] = cell
        rows = [list(k) + [grid[k].get(c, "-") for c in classes]
                for k in sorted(grid, key=lambda k: tuple(str(x) for x in k))]
        parts.append("## insightface: throughput (samples/s) by number of classes\n"
                     + tabulate(rows, headers=["framework", "precision", "batch/dev", "nodes x dev"]
                                + [_count(c) for c in classes], tablefmt="github",
                                disable_numparse=True))
    return "\n\n".join(parts)


def render_special(results) -> str:
    """The special cases' sections of the report; empty when the results have none."""
    p = results.points
    special = p[(p.bench == "train") & p.model.isin(("wide_deep", "gpt", "insightface"))]
    searches = results.searches
    if special.empty and not searches:
        return ""
    m = metrics(results.with_points(special))
    parts = []
    if len(m) and (m.model == "wide_deep").any():
        parts.append(wide_deep_section(m[m.model == "wide_deep"]))
    if len(m) and (m.model == "gpt").any():
        parts.append(gpt_section(m[m.model == "gpt"]))
    if searches or (len(m) and (m.model == "insightface").any()):
        parts.append(insightface_section(m if len(m) else pd.DataFrame(columns=["model", "search"]),
                                         searches))
    return "\n\n".join(p for p in parts if p)
