"""DLPerf's special cases in the report (docs/special.md).

- Wide & Deep: latency per iteration (ms) and peak memory per rank against the deep
  vocabulary size, by embedding (sharded or replicated) and ranks; OOM is a result, shown
  as OOM; DLPerf's W&D table (analysis/published/, `figure: wide_deep`) beside it.
- GPT: DLPerf's GPT table, one row per point: layout, batch sizes, latency, memory per rank,
  samples/s, tokens/s, achieved TFLOP/s per device (analysis/figures/flops.py), percent of peak,
  aggregate PFLOP/s and a pipeline's bubble; DLPerf's published cases of the same layout and
  shape beside them (analysis/published/layouts.py).
- InsightFace: the largest num_classes that trains per ranks x batch (launchers/plan/search.py),
  with every size tried and its outcome.

Which section a model's points go to is its spec's `report` (contract/models/): SECTIONS
below, in the report's order. The per-point figures these sections show are
analysis/figures/metrics.py's `metrics(results)`,
which the regression gate (analysis/gate/compare.py) reads too. Everything here is a function
of what analysis.load read (the points' settings: Results.manifests; the searches:
Results.searches).
"""
from collections import namedtuple

from typing import Any

import pandas as pd
from tabulate import tabulate

from analysis import tables
from analysis.figures.metrics import memory_cell, memory_kinds, memory_note, metrics
from analysis.published import layouts as published_layouts
from analysis.published import sources as published
from analysis.sections import llama, moe
from contract import models


def _count(size) -> str:
    """3200000 -> 3.2M, 10000 -> 10K: column headings of vocabulary sizes."""
    for div, unit in ((10**9, "G"), (10**6, "M"), (10**3, "K")):
        if size >= div:
            return f"{size / div:g}{unit}"
    return str(size)


def wide_deep_section(wdl_rows: pd.DataFrame, published_rows=()) -> str:
    """Ours by deep vocabulary size (rows: framework, embedding, precision, batch, ranks),
    then each published W&D table (analysis/published/, `figure: wide_deep`) as it stands."""
    parts = []
    for size, pts in wdl_rows.groupby("model_size", sort=True, dropna=False):
        vocabs = sorted(int(vocab) for vocab in pts.deep_vocab_size.dropna().unique())
        grid: dict = {}
        row: Any  # a row: its columns' own types, which pandas-stubs cannot know
        for row in pts.itertuples():
            # a spec from before model.embedding ran replicated
            key = (row.framework, getattr(row, "embedding", None) or "replicated", row.precision,
                   row.batch_size, tables.allocation(row.nodes, row.gpus_per_node))
            if row.status in ("ok", "partial") and row.latency_ms is not None:
                mem = (f", {tables.gib(row.peak_memory_bytes):.2f} GiB"
                       if row.peak_memory_bytes is not None else "")
                cell = f"{row.latency_ms:.2f} ms{mem}" + ("*" if row.status == "partial" else "")
            else:
                cell = tables.label(row.status)
            grid.setdefault(key, {})[int(row.deep_vocab_size)] = cell
        rows = [list(key) + [grid[key].get(vocab, "-") for vocab in vocabs]
                for key in sorted(grid, key=lambda key: tuple(str(part) for part in key))]
        parts.append(f"## wide_deep ({size}): latency per iteration and peak memory per rank\n"
                     f"columns: deep vocabulary size; memory: {memory_note(memory_kinds(pts))}; "
                     f"embedding: sharded = "
                     f"the tables split by rows over the ranks, replicated = whole on every rank\n\n"
                     + tabulate(rows, headers=["framework", "embedding", "precision", "batch/dev",
                                               "nodes x dev"] + [_count(vocab) for vocab in vocabs],
                                tablefmt="github", disable_numparse=True))
    if len(published_rows):
        for _, source_rows in pd.DataFrame(list(published_rows)).groupby("file", sort=True):
            parts.append(_published_wide_deep(source_rows))
    return "\n\n".join(parts)


def _published_wide_deep(rows: pd.DataFrame) -> str:
    """One published W&D table, its figures as transcribed (memory in the source's MB)."""
    first = rows.iloc[0]
    vocabs = sorted(int(vocab) for vocab in rows.deep_vocab_size.unique())
    grid: dict = {}
    row: Any  # a row: its columns' own types, which pandas-stubs cannot know
    for row in rows.itertuples():
        cell = "OOM" if row.status == "oom" else f"{row.latency_ms:g} ms, {row.memory_mb:g} MB"
        grid.setdefault((row.framework, row.implementation or row.framework), {})[int(row.deep_vocab_size)] = cell
    table = [list(key) + [cells.get(vocab, "-") for vocab in vocabs] for key, cells in grid.items()]
    per_device = f" ({first.batch_per_device} per device)" if first.batch_per_device else ""
    return (f"### Published beside it: {first.file} ({first.date or 'undated'})\n"
            f"{first.source}; {first.devices} x {first.device}"
            + (f" ({first.devices // first.nodes_of} nodes x {first.nodes_of})" if first.nodes_of else "")
            + f", batch {first.batch_size}{per_device}; data: {first.data or 'not stated'}. "
            "Latency per iteration and device memory per device as published (MB); OOM: out of "
            "device memory. Our cells are per rank, at our batch per device.\n\n"
            + tabulate(table, headers=["framework", "implementation"] + [_count(vocab) for vocab in vocabs],
                       tablefmt="github", disable_numparse=True))


def _layout(point) -> str:
    """'2x4x4' (dp x tp x pp), with FSDP, sequence parallelism and the schedule where set."""
    if tables.missing(point.dp):
        return "n/a"
    text = f"{int(point.dp)}x{int(point.tp)}x{int(point.pp)}"
    extra = (["fsdp"] * bool(point.fsdp) + ["sp"] * bool(point.sequence_parallel and point.tp > 1)
             + ([{"interleaved_1f1b": f"interleaved v{int(point.virtual_stages)}"}.get(point.schedule, point.schedule)]
                if point.pp > 1 else []))
    return text + (f" ({', '.join(extra)})" if extra else "")


GPT_HEADERS = ["case", "hidden x layers", "dp x tp x pp", "micro", "accum", "global", "latency (ms)",
               "memory/rank (GiB)", "samples/s", "tokens/s", "TFLOP/s/dev", "% of peak", "PFLOP/s",
               "bubble ideal / measured", "framework", "precision", "status"]


def gpt_section(gpt_rows: pd.DataFrame, published_rows=None, error=None) -> str:
    """DLPerf's GPT table, one row per point: the layout, the batch sizes, latency per
    iteration, memory per rank, samples/s and tokens/s, TFLOP/s per device (the suite's count,
    contract/flops.py: no recompute term), percent of peak, aggregate PFLOP/s and a pipeline's
    bubble; then the published cases of the same layout and shape
    (analysis/published/dlperf_gpt_v100.yaml) beside ours, with our TFLOP/s in their count."""
    peaks = sorted({f"{peak:g}" for peak in gpt_rows.peak_tflops.dropna()})
    kinds = memory_kinds(gpt_rows)
    rows = []
    order = gpt_rows.assign(_devices=gpt_rows.devices, _case=gpt_rows.case.fillna("")).sort_values(
        ["_case", "hidden", "_devices", "point"])
    for point in order.itertuples():
        ok = point.status in ("ok", "partial")
        cell = tables.number if ok else (lambda v, spec: tables.label(point.status))
        bubble = (f"{point.ideal_bubble:.0%} / {tables.number(point.measured_bubble, '.0%')}"
                  if not tables.missing(point.ideal_bubble) else "-")
        memory = None if tables.missing(point.peak_memory_bytes) else tables.gib(point.peak_memory_bytes)
        rows.append([point.case or "-", f"{point.hidden}x{point.layers}" + (" rc" if point.recompute else ""),
                     _layout(point),
                     point.batch_size if tables.missing(point.micro_batch_size) else f"{point.micro_batch_size:d}",
                     tables.number(point.accumulation, "d", "1"), point.global_batch_size,
                     cell(point.latency_ms, ".1f"), memory_cell(cell(memory, ".2f"), point.memory_kind, kinds),
                     cell(point.throughput, ".3g"), cell(point.tokens_per_s, ".0f"),
                     cell(point.tflops_per_device, ".3g"),
                     tables.percent(point.mfu) if ok else tables.label(point.status), cell(point.pflops, ".3g"),
                     bubble, point.framework,
                     point.precision + (f" {point.amp_dtype}" if point.precision == "amp" else ""),
                     tables.label(point.status) + ("*" if point.status == "partial" else "")])
    text = ("## gpt: throughput and FLOP/s by layout (DLPerf's GPT table)\n"
            "dp x tp x pp: data, tensor and pipeline parallel sizes (fsdp: parameters, gradients and "
            "optimizer states sharded over dp; sp: sequence parallel); micro x dp x accum = global "
            "(sequences an iteration); latency: one iteration (the timed window / its iterations, median "
            f"of ok repeats); memory: the largest rank's peak of {memory_note(kinds)}; TFLOP/s: "
            "72 s l h^2 + 12 l h s (s+1)/2 + 6 s h V a sequence, the causal pairs' attention and no "
            "recompute term (rc: model.recompute; contract/models/gpt.py, docs/flops.md); % of peak: against the "
            f"device's dense peak ({', '.join(peaks) + ' TFLOP/s' if peaks else 'unknown here: n/a; set peak_tflops='}"
            "); "
            "PFLOP/s: all devices; bubble: the pipeline's idle fraction, ideal (pp-1)/(v m + pp-1) / "
            "measured (1 - a stage's forward and backward of its micro-batches alone / the iteration)\n\n"
            + tabulate(rows, headers=GPT_HEADERS, tablefmt="github", disable_numparse=True))
    beside = gpt_published_section(gpt_rows, published_rows, error)
    return text + ("\n\n" + beside if beside else "")


def _match_keys(point) -> dict:
    """A point's layout and shape as analysis/published/layouts.py matches them (no device
    and no amp dtype: a published case is set beside ours on any device, and says its own)."""
    keys = {"nodes": point.nodes, "gpus_per_node": point.gpus_per_node, "dp": point.dp, "tp": point.tp, "pp": point.pp,
            "micro_batch_size": point.micro_batch_size, "global_batch_size": point.global_batch_size,
            "hidden": point.hidden, "heads": point.heads, "layers": point.layers, "seq_len": point.seq_len,
            "precision": point.precision, "model": point.model, "recompute": bool(point.recompute),
            "fsdp": bool(point.fsdp)}
    return {key: (int(value) if isinstance(value, float) and value == int(value) else value)
            for key, value in keys.items() if not tables.missing(value)}


PUBLISHED_FIGURES = ("latency_ms", "memory_mib", "samples_per_s", "tflops_per_gpu", "peak_percent")


def gpt_published_section(gpt_rows: pd.DataFrame, published_rows=None, error=None) -> str:
    """Each point beside the published cases of its layout and shape, with ours / theirs;
    `published_rows`: the published layouts (default: read here), `error`: why they could
    not be read (published.rows_or_error)."""
    if published_rows is None:
        published_rows, error = published.rows_or_error(published_layouts.rows)
    if error:
        return f"- published GPT figures skipped: {error}"
    published_gpt, rows = published_layouts.of_section(published_rows, "gpt"), []
    for point in gpt_rows.itertuples():
        if tables.missing(point.dp):
            continue
        for pub in published_layouts.find(_match_keys(point), published_gpt):
            ok = point.status in ("ok", "partial")
            ours = point.throughput if ok else None
            ratio = (f"{ours / pub['samples_per_s']:.2f}"
                     if not tables.missing(ours) and pub.get("samples_per_s") else "-")
            theirs_count = tables.number(point.published_tflops_per_device if ok else None, ".3g", "-")
            rows.append([point.point, pub["case"], pub.get("implementation") or pub["impl"], pub["device"],
                         *(tables.number(pub.get(key), "g", "-") for key in PUBLISHED_FIGURES), theirs_count, ratio])
    if not rows:
        return ""
    return ("### Published beside it: the same layout and shape\n"
            "Figures as published (their device, precision and software: analysis/published/); "
            "their TFLOP/s count Megatron's FLOPs (the full s x s, and the recomputed forward with "
            "recompute), so ours is given in that count too; ours / published: samples/s\n\n"
            + tabulate(rows, headers=["point", "case", "implementation", "device", "latency (ms)",
                                      "memory (MiB)", "samples/s", "TFLOP/s/GPU", "% of peak",
                                      "our TFLOP/s/dev, their count", "ours / published"],
                       tablefmt="github", disable_numparse=True))


def insightface_section(insightface_rows: pd.DataFrame, searches: list) -> str:
    parts = []
    if searches:
        rows = []
        for search in searches:
            tries = ", ".join(f"{tried['value']} {'ok' if tried['outcome'] == 'ok' else tables.label(tried['outcome'])}"
                              for tried in search["tries"])
            note = "" if search.get("done") else " (running or cut short)"
            if search.get("stopped"):
                note = f" (stopped at {search['stopped']})"
            rows.append([search["model"], search["framework"], search["precision"],
                         tables.allocation(search["nodes"], search["gpus_per_node"]),
                         search["batch_size"], search["key"],
                         "none" if search["largest_ok"] is None else search["largest_ok"],
                         search["smallest_oom"] if search["smallest_oom"] is not None else "-",
                         tries + note])
        parts.append("## Largest size that trains (search, OOM as data)\n"
                     + tabulate(rows, headers=["model", "framework", "precision", "nodes x dev", "batch/dev",
                                               "key", "largest ok", "smallest OOM", "tries in order"],
                                tablefmt="github", disable_numparse=True))
    plain = insightface_rows[insightface_rows.search.isna()]
    if len(plain):
        classes = sorted(int(count) for count in plain.num_classes.dropna().unique())
        grid: dict = {}
        for point in plain.itertuples():
            key = (point.framework, point.precision, point.batch_size,
                   tables.allocation(point.nodes, point.gpus_per_node))
            cell = (f"{point.throughput:.1f}" + ("*" if point.status == "partial" else "")
                    if point.status in ("ok", "partial") else tables.label(point.status))
            grid.setdefault(key, {})[int(point.num_classes)] = cell
        rows = [list(key) + [grid[key].get(count, "-") for count in classes]
                for key in sorted(grid, key=lambda key: tuple(str(part) for part in key))]
        parts.append("## insightface: throughput (samples/s) by number of classes\n"
                     + tabulate(rows, headers=["framework", "precision", "batch/dev", "nodes x dev"]
                                + [_count(count) for count in classes], tablefmt="github",
                                disable_numparse=True))
    return "\n\n".join(parts)


def _wide_deep(wdl_rows, results, layouts, error) -> str:
    wdl, wdl_error = published.rows_or_error(published.wide_deep_rows)
    skipped = [f"- published W&D figures skipped: {wdl_error}"] if wdl_error else []
    return "\n\n".join(skipped + [wide_deep_section(wdl_rows, wdl)])


# A report section (a model spec's `report`): its function of (metrics of its points, results,
# published layouts, why they could not be read), whether it reads the published layouts, and
# whether it shows the sweep's searches (of any model: the largest size that trains).
Section = namedtuple("Section", "render layouts searches")
SECTIONS = {  # in the report's order
    "wide_deep": Section(_wide_deep, False, False),
    "gpt": Section(lambda rows, results, layouts, error: gpt_section(rows, layouts, error), True, False),
    "llama": Section(llama.section, True, False),
    "moe": Section(moe.section, True, False),
    "insightface": Section(lambda rows, results, layouts, error: insightface_section(rows, results.searches),
                           False, True)}


def section_of(name):
    """A model's report section (its spec's `report`), None for none or a name no spec has."""
    spec = models.find(name)
    return spec.report if spec else None


def render_special(results) -> str:
    """The special cases' sections of the report; empty when the results have none. A search
    of any model is InsightFace's section's (the largest size that trains)."""
    points = results.points
    special = points[(points.bench == "train") & points.model.map(section_of).notna()] if len(points) else points
    searches = results.searches
    if special.empty and not searches:
        return ""
    rows = metrics(results.with_points(special))
    sections = rows.model.map(section_of) if len(rows) else pd.Series(dtype=object)
    layouts, error = [], None   # read once for every section that sets them beside its points
    if any(SECTIONS[name].layouts for name in set(sections)):
        layouts, error = published.rows_or_error(published_layouts.rows)
    parts = []
    for name, section in SECTIONS.items():
        mine = rows[sections == name] if len(rows) else rows
        if len(mine) or (section.searches and searches):
            parts.append(section.render(mine if len(mine) else pd.DataFrame(columns=["model", "search"]),
                                        results, layouts, error))
    return "\n\n".join(part for part in parts if part)
