"""DLPerf's special cases in the report (docs/special.md).

- Wide & Deep: latency per iteration (ms) and peak memory per rank against the deep
  vocabulary size, by embedding (sharded or replicated) and ranks; OOM is a result, shown
  as OOM; DLPerf's W&D table (analysis/published/, `figure: wide_deep`) beside it.
- GPT: tokens/s, achieved TFLOP/s per device (analysis/flops.py) and MFU.
- InsightFace: the largest num_classes that trains per ranks x batch (launchers/search.py),
  with every size tried and its outcome.

The per-point figures these sections show are analysis/metrics.py's `metrics(results)`,
which the regression gate (analysis/compare.py) reads too (`special.metrics` is the same
function, kept under its old name). Everything here is a function of what analysis.load
read (the points' settings: Results.manifests; the searches: Results.searches).
"""
import pandas as pd
from tabulate import tabulate

from analysis import published, tables
from analysis.metrics import MODEL_KEYS, metrics  # noqa: F401 (special.MODEL_KEYS, special.metrics)

OWN_SECTIONS = ("wide_deep", "insightface")  # left out of the generic tables: see render()


def _label(status) -> str:
    return tables.label(status)


def _count(n) -> str:
    """3200000 -> 3.2M, 10000 -> 10K: column headings of vocabulary sizes."""
    for div, unit in ((10**9, "G"), (10**6, "M"), (10**3, "K")):
        if n >= div:
            return f"{n / div:g}{unit}"
    return str(n)


def wide_deep_section(m: pd.DataFrame, published_rows=()) -> str:
    """Ours by deep vocabulary size (rows: framework, embedding, precision, batch, ranks),
    then each published W&D table (analysis/published/, `figure: wide_deep`) as it stands."""
    parts = []
    for size, pts in m.groupby("model_size", sort=True, dropna=False):
        vocabs = sorted(int(v) for v in pts.deep_vocab_size.dropna().unique())
        grid = {}
        for r in pts.itertuples():
            # a spec from before model.embedding ran replicated
            key = (r.framework, getattr(r, "embedding", None) or "replicated", r.precision,
                   r.batch_size, f"{r.nodes}x{r.gpus_per_node}")
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
                     f"(device where ranks had one, else host peak RSS); embedding: sharded = "
                     f"the tables split by rows over the ranks, replicated = whole on every rank\n\n"
                     + tabulate(rows, headers=["framework", "embedding", "precision", "batch/dev",
                                               "nodes x dev"] + [_count(v) for v in vocabs],
                                tablefmt="github", disable_numparse=True))
    if len(published_rows):
        for _, rows in pd.DataFrame(list(published_rows)).groupby("file", sort=True):
            parts.append(_published_wide_deep(rows))
    return "\n\n".join(parts)


def _published_wide_deep(rows: pd.DataFrame) -> str:
    """One published W&D table, its figures as transcribed (memory in the source's MB)."""
    first = rows.iloc[0]
    vocabs = sorted(int(v) for v in rows.deep_vocab_size.unique())
    grid = {}
    for r in rows.itertuples():
        cell = "OOM" if r.status == "oom" else f"{r.latency_ms:g} ms, {r.memory_mb:g} MB"
        grid.setdefault((r.framework, r.implementation or r.framework), {})[int(r.deep_vocab_size)] = cell
    table = [list(k) + [cells.get(v, "-") for v in vocabs] for k, cells in grid.items()]
    per_device = f" ({first.batch_per_device} per device)" if first.batch_per_device else ""
    return (f"### Published beside it: {first.file} ({first.date or 'undated'})\n"
            f"{first.source}; {first.devices} x {first.device}"
            + (f" ({first.devices // first.nodes_of} nodes x {first.nodes_of})" if first.nodes_of else "")
            + f", batch {first.batch_size}{per_device}; data: {first.data or 'not stated'}. "
            "Latency per iteration and device memory per device as published (MB); OOM: out of "
            "device memory. Our cells are per rank, at our batch per device.\n\n"
            + tabulate(table, headers=["framework", "implementation"] + [_count(v) for v in vocabs],
                       tablefmt="github", disable_numparse=True))


def gpt_section(m: pd.DataFrame) -> str:
    parts = []
    for (size, seq), pts in m.groupby(["model_size", "seq_len"], sort=True, dropna=False):
        peaks = sorted({f"{v:g}" for v in pts.peak_tflops.dropna()})
        parts.append(f"## gpt ({size}, seq {int(seq) if seq == seq else '?'}): tokens/s, "
                     "TFLOP/s per device, MFU\n"
                     "FLOPs: Megatron's 72*B*s*l*h^2*(1 + s/(6h) + V/(12*l*h)) per iteration "
                     "(analysis/flops.py); MFU against the device's dense peak "
                     f"({', '.join(peaks) + ' TFLOP/s' if peaks else 'unknown: n/a; set peak_tflops='})"
                     + ("\nMFU is taken against the dtype the math ran in: fp32 runs on Ampere or "
                        "newer count against the TF32 peak, AMP against its bf16 or fp16 peak "
                        "(analysis/peaks.yaml)" if peaks else ""))
        for title, column, fmt in (("Tokens/s (samples/s x seq_len)", "tokens_per_s", ".0f"),
                                   ("Achieved TFLOP/s per device", "tflops_per_device", ".3g"),
                                   ("MFU (model FLOPs utilisation)", "mfu", ".1%")):
            parts.append(f"### {title}\n{tables.table(pts, column, fmt)}")
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
    special = p[(p.bench == "train") & p.model.isin(("wide_deep", "gpt", "insightface", "llama3"))]
    searches = results.searches
    if special.empty and not searches:
        return ""
    m = metrics(results.with_points(special))
    parts = []
    if len(m) and (m.model == "wide_deep").any():
        try:
            wdl = published.wide_deep_rows()
        except published.PublishedError as exc:
            wdl = ()
            parts.append(f"- published W&D figures skipped: {exc}")
        parts.append(wide_deep_section(m[m.model == "wide_deep"], wdl))
    if len(m) and (m.model == "gpt").any():
        parts.append(gpt_section(m[m.model == "gpt"]))
    if len(m) and (m.model == "llama3").any():   # a section of its own: analysis/llama.py
        from analysis import llama
        parts.append(llama.section(m[m.model == "llama3"], results))
    if searches or (len(m) and (m.model == "insightface").any()):
        parts.append(insightface_section(m if len(m) else pd.DataFrame(columns=["model", "search"]),
                                         searches))
    return "\n\n".join(p for p in parts if p)
