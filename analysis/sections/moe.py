"""The report's mixture-of-experts section (docs/moe.md): per point its layout (expert
parallelism with the grid), batches, latency, memory, tokens/s (all devices and per device),
TFLOP/s per device and MFU on the activated parameters, the experts' load and the all-to-all's
share of a step; under it the published figures of DeepSeek-V3 (analysis/published/,
dgxc-benchmarking's), each with the points of the sweep that have its layout.

Figures of a point, from its ok repeats' rank records (their `moe`, frameworks/pytorch/models/moe.py):
- FLOPs: the suite's one count (contract/flops.py) on the activated parameters, on the terms of
  dgxc-benchmarking's (NeMo's) count of DeepSeek-V3 (contract/models/deepseek_v3.py); where a
  model's published figures count otherwise (NeMo's s / 2 keys a query), "MFU, their count" gives
  ours in theirs (their count adds one MTP layer too: module text);
- expert load: max over mean tokens per expert of a step's global counts (the worst MoE layer
  of a stage), the mean over the timed steps; the worst stage (rank) of a repeat; the median
  over repeats: 1.0 is a perfect balance, experts / top_k the worst there can be;
- all-to-all share: a rank's seconds in the dispatch and combine all-to-alls (forward and
  backward) over its timed window; the mean over ranks; the median over repeats. On the CPU
  gloo's collectives return when done, so the seconds include waiting for the slowest rank of
  the expert group, as NCCL's kernels do on GPUs;
- memory: the largest rank's peak, of device memory, else a CPU rank's live tensors, else host
  RSS (analysis/figures/metrics.py), the table saying which.
"""
import statistics

import pandas as pd
from tabulate import tabulate

from analysis import tables
from analysis.figures.metrics import memory_cell, memory_kinds, memory_note
from analysis.published import layouts as published_layouts
from analysis.published import sources as published
from analysis.sections import llama

def expert_figures(results, sweep, point) -> dict:
    """{load, a2a_share} of a point (module docstring), None where no record says."""
    by_repeat: dict = {}
    ok = results.runs_of(sweep, point)
    ok = set(ok[ok.status == "ok"].repeat) if len(ok) else set()
    for rank in results.environments:
        moe, window = rank.get("moe"), rank.get("window")
        if str(rank["sweep"]) != str(sweep) or rank["point"] != point or rank["repeat"] not in ok or not moe:
            continue
        timed = moe.get("timed") or {}
        seconds = (window or {}).get("end", 0) - (window or {}).get("start", 0)
        rep = by_repeat.setdefault(rank["repeat"], {"load": [], "share": []})
        if timed.get("load_max_mean") is not None:
            rep["load"].append(timed["load_max_mean"])
        if seconds > 0 and timed.get("a2a_s") is not None:
            rep["share"].append(timed["a2a_s"] / seconds)
    loads = [max(rep["load"]) for rep in by_repeat.values() if rep["load"]]
    shares = [statistics.fmean(rep["share"]) for rep in by_repeat.values() if rep["share"]]
    return {"load": statistics.median(loads) if loads else None,
            "a2a_share": statistics.median(shares) if shares else None}


def _ours(point, manifest, figures, kinds) -> list:
    lay, model = manifest.get("parallel") or {}, manifest.get("model") or {}
    ok = point.status in ("ok", "partial")
    per_device = point.tokens_per_s / point.devices if ok and point.tokens_per_s else None
    memory = tables.gib(point.peak_memory_bytes) if ok and not tables.missing(point.peak_memory_bytes) else None
    status = "" if point.status == "ok" else f" ({tables.label(point.status)})"
    return [point.point + status,
            f"{model.get('size', '?')}, {model.get('experts', '?')} experts, top {model.get('top_k', '?')}",
            tables.layout_label(lay), tables.allocation(point.nodes, point.gpus_per_node),
            f"{lay.get('micro_batch_size', point.batch_size)} / {lay.get('accumulation', 1)} / "
            f"{point.global_batch_size}",
            point.precision + (f" {point.amp_dtype}" if point.precision == "amp" and point.amp_dtype else ""),
            tables.number(point.latency_ms if ok else None, ",.1f"),
            memory_cell(tables.number(memory, ".2f"), point.memory_kind, kinds),
            tables.number(point.tokens_per_s if ok else None, ",.0f"), tables.number(per_device, ",.0f"),
            tables.number(point.tflops_per_device if ok else None, ".4g"),
            tables.percent(point.mfu if ok else None),
            tables.number(figures["load"] if ok else None, ".2f"),
            tables.number(figures["a2a_share"] if ok else None, ".1%")]


def _published(row: dict, ours: list) -> list:
    derived = "*" if "tokens_per_s_per_gpu" in (row.get("derived") or ()) else ""
    lay = f"tp{row['tp']} pp{row['pp']} ep{row['ep']} dp{row['dp']}" + (f" cp{row['cp']}" if row["cp"] > 1 else "")
    return [row["file"], row["case"], row.get("implementation") or row["impl"], row["device"],
            tables.allocation(row["nodes"], row["gpus_per_node"]), lay,
            f"{row.get('micro_batch_size') or '-'} / {row.get('accumulation') or '-'} / "
            f"{row.get('global_batch_size') or '-'}",
            tables.number(row.get("step_time_s"), ",.2f", "-"),
            tables.number(row.get("tokens_per_s_per_gpu"), ",.1f", "-") + derived,
            tables.number(row.get("tflops_per_gpu"), ".4g", "-"),
            tables.number(row.get("mfu_percent"), ".2f", "-") + ("%" if row.get("mfu_percent") else ""),
            row.get("date") or "undated", ", ".join(ours) or "none"]


HEADERS = ["point", "model", "layout", "nodes x dev", "micro / accum / global", "precision",
           "latency (ms/iter)", "peak mem/rank (GiB)", "tokens/s", "tokens/s per device",
           "TFLOP/s per device", "MFU", "expert load (max/mean)", "all-to-all share"]
PUBLISHED_HEADERS = ["source", "case", "implementation", "device", "nodes x gpus", "layout",
                     "micro / accum / global", "step (s)", "tokens/s per GPU", "TFLOP/s per GPU",
                     "MFU", "date", "our points with its layout"]
NO_FIGURE = ("No public figure, so none is shown: torchtitan's MoE training (its benchmarks/ "
             "publish Llama 3 reports and a DeepSeek-V3 inference note; dgxc-benchmarking's "
             "torchtitan DeepSeek-V3 recipe gives layouts only), DeepSeek-V3 16B, "
             "dgxc-benchmarking's DeepSeek-V3 after v25.05.04 and its Qwen3 recipes (layouts "
             "only).")


def _table(ours: list) -> str:
    """Our points; the column of MFU in a published count only where a point has one."""
    theirs = any(row[-1] != "n/a" for row in ours)
    headers = HEADERS + ["MFU, their count"] * theirs
    body = [row if theirs else row[:-1] for row in ours]
    return tabulate(body, headers=headers, tablefmt="github", disable_numparse=True)


def section(moe_rows: pd.DataFrame, results, rows=None, error=None) -> str:
    """The MoE section of the metrics `moe_rows` (analysis/figures/metrics.py) of MoE points;
    `rows`: the published layouts (default: read here), `error`: why they could not be read."""
    if rows is None:
        rows, error = published.rows_or_error(published_layouts.rows)
    notes = [f"- published layouts skipped: {error}"] if error else []
    rows = published_layouts.of_section(rows, "moe")
    ours: list = []
    matched: dict = {}
    kinds = memory_kinds(moe_rows)
    for point in moe_rows.sort_values("point").itertuples():
        manifest = results.manifest(point.sweep, point.point)
        cells = _ours(point, manifest, expert_figures(results, point.sweep, point.point), kinds)
        theirs = tables.percent(point.published_mfu if point.status in ("ok", "partial") else None)
        ours.append(cells + [theirs])
        found = published_layouts.find(llama.point_layout(manifest, point.device), rows) if point.device else []
        for row in found:
            matched.setdefault(row["case"], []).append(point.point)
    text = ("## Mixture of experts: tokens/s, activated TFLOP/s and MFU, expert load, all-to-all\n"
            "FLOPs per token on the activated parameters, dgxc-benchmarking's (NeMo's) count of "
            "DeepSeek-V3 (Qwen3's MoE alike): 6 x the attention, dense, shared and top-k routed "
            "experts' and output weights + the attention's scores over the causal pairs, a "
            "sliding-window layer's over its window (contract/flops.py, docs/flops.md); MFU, their "
            "count: ours in NeMo's (s / 2 keys a query); MFU against the device's dense "
            f"peak {llama.peak_note(moe_rows)}; "
            "expert load: max over mean tokens per expert, per step, the worst MoE layer, mean over the "
            "timed steps; all-to-all share: the dispatch and combine all-to-alls' seconds over the timed "
            "window, mean over ranks; latency: one iteration (the global batch); memory: the largest "
            f"rank's peak of {memory_note(kinds)}\n\n"
            + _table(ours))
    if rows:
        text += ("\n\n### Published: DeepSeek-V3 671B\n"
                 "As published (analysis/published/dgxc_deepseek_v3.yaml): MFU against each device's "
                 "BF16 peak (H100 989, GB200 2450 TFLOP/s); their FLOPs count one multi-token-prediction "
                 "layer, which the suite's DeepSeek-V3 does not train (so ours count about 4% fewer at "
                 "671B and 4096); * = derived here (the job's tokens/s / GPUs).\n\n"
                 + tabulate([_published(row, matched.get(row["case"], [])) for row in rows],
                            headers=PUBLISHED_HEADERS, tablefmt="github", disable_numparse=True))
    return "\n".join(notes + [text, "", NO_FIGURE])
