"""The report's Llama 3 section (docs/llama3.md): per point its layout, batch sizes, latency,
memory, tokens/s (all devices and per device), achieved TFLOP/s per device and MFU, and under
it the published figures of the same configuration (analysis/published/, `figure: layouts`:
dgxc-benchmarking's and torchtitan's Llama 3.1) as published, so that a cluster's run reads
against NVIDIA's and the PyTorch team's.

FLOPs: the suite's one count (contract/flops.py), 6 N s + 12 l h s (s + 1) / 2 a sequence
(contract/models/llama3.py: the causal pairs' attention); dgxc-benchmarking's MFU and torchtitan's
count the full s x s, 6 N + 12 l h s a token, so beside ours the table gives our MFU in their
count, the figure their published MFU compares with. A point is set beside a published row
when analysis/published/layouts.py's `matches` says its layout is the row's: the grid, the
micro and global batch, the shape, the sequence, the precision, and the device where the
record names one; a published setting the point does not state (recompute, compile, fsdp)
is no obstacle when the point leaves it unsaid, and an obstacle when it differs.
"""
import pandas as pd
from tabulate import tabulate

from analysis import tables
from analysis.figures.metrics import memory_cell, memory_kinds, memory_note
from analysis.published import layouts as published_layouts
from analysis.published import sources as published

def point_layout(manifest: dict, device=None) -> dict:
    """The point as analysis/published/layouts.py's `matches` reads it (its module says)."""
    lay, model = manifest.get("parallel") or {}, manifest.get("model") or {}
    point = {key: manifest.get(key) for key in ("nodes", "gpus_per_node", "precision", "amp_dtype")}
    point.update({key: lay.get(key) for key in ("dp", "tp", "pp", "micro_batch_size", "global_batch_size",
                                              "fsdp")})
    point["cp"], point["ep"] = lay.get("cp", 1), lay.get("ep", 1)
    if lay.get("pp", 1) > 1:
        point["schedule"] = lay.get("schedule")
        if lay.get("schedule") == "interleaved_1f1b":
            point["virtual_stages"] = lay.get("virtual_stages")
    point.update({key: model.get(key) for key in ("hidden", "heads", "layers", "seq_len")})
    point["recompute"] = "full" if model.get("recompute") else "none"
    point["compile"] = bool(manifest.get("compile"))
    point["device"] = device
    return {key: value for key, value in point.items() if value is not None}


def _ours(point, manifest, kinds=()) -> list:
    lay, model = manifest.get("parallel") or {}, manifest.get("model") or {}
    ok = point.status in ("ok", "partial")
    per_device = point.tokens_per_s / point.devices if ok and point.tokens_per_s else None
    batches = (f"{lay.get('micro_batch_size', point.batch_size)} / {lay.get('accumulation', 1)} / "
               f"{point.global_batch_size}")
    latency = point.latency_ms if ok else None   # one iteration of the global batch (figures/metrics.py)
    memory = tables.gib(point.peak_memory_bytes) if ok and not tables.missing(point.peak_memory_bytes) else None
    status = "" if point.status == "ok" else f" ({tables.label(point.status)})"
    return [point.point + status, f"{model.get('size', '?')}, seq {model.get('seq_len', '?')}",
            tables.layout_label(lay), tables.allocation(point.nodes, point.gpus_per_node), batches,
            point.precision + (f" {point.amp_dtype}" if point.precision == "amp" and point.amp_dtype else "")
            + (", recompute" if model.get("recompute") else ""),
            tables.number(latency, ",.1f"), memory_cell(tables.number(memory, ".2f"), point.memory_kind, kinds),
            tables.number(point.tokens_per_s if ok else None, ",.0f"), tables.number(per_device, ",.0f"),
            tables.number(point.tflops_per_device if ok else None, ".4g"),
            tables.percent(point.mfu if ok else None), tables.percent(point.published_mfu if ok else None)]


def _published(row: dict) -> list:
    per_gpu = row.get("tokens_per_s_per_gpu")
    derived = set(row.get("derived") or ())
    mark = "*" if "tokens_per_s_per_gpu" in derived else ""
    step = row.get("step_time_s")
    memory = row.get("memory_gib") or (row["memory_mib"] / 1024 if row.get("memory_mib") else None)
    return [row["file"], row["case"], row.get("implementation") or row["impl"], row["device"],
            tables.allocation(row["nodes"], row["gpus_per_node"]),
            f"{row.get('micro_batch_size') or row.get('local_batch_size') or '-'} / "
            f"{row.get('accumulation') or '-'} / {row.get('global_batch_size') or '-'}",
            row["precision"] + (f" {row['amp_dtype']}" if row.get("amp_dtype") else ""),
            tables.number(step * 1e3 if step else None, ",.0f", "-"), tables.number(memory, ".1f", "-"),
            tables.number(per_gpu, ",.0f", "-") + mark, tables.number(row.get("mfu_percent"), ".2f", "-")
            + ("%" if row.get("mfu_percent") else ""), row.get("date") or "undated"]


def peak_note(points: pd.DataFrame) -> str:
    """'(989 TFLOP/s)': the points' peaks, or what to set where none is known."""
    peaks = sorted({f"{peak:g}" for peak in points.peak_tflops.dropna()}) if "peak_tflops" in points else []
    return f"({', '.join(peaks) + ' TFLOP/s' if peaks else 'unknown: n/a; set peak_tflops='})"


HEADERS = ["point", "model", "layout", "nodes x dev", "micro / accum / global", "precision",
           "latency (ms/iter)", "peak mem/rank (GiB)", "tokens/s", "tokens/s per device",
           "TFLOP/s per device", "MFU", "MFU, their count"]
PUBLISHED_HEADERS = ["source", "case", "implementation", "device", "nodes x gpus",
                     "micro / accum / global", "precision", "step (ms)", "memory/GPU (GiB)",
                     "tokens/s per GPU", "MFU", "date"]


def section(llama_rows: pd.DataFrame, results, rows=None, error=None) -> str:
    """The Llama 3 section of the metrics `llama_rows` (analysis/figures/metrics.py) of llama3
    points; `rows`: the published layouts (default: analysis/published/'s, read here), `error`:
    why they could not be read (published.rows_or_error)."""
    if rows is None:
        rows, error = published.rows_or_error(published_layouts.rows)
    notes = [f"- published layouts skipped: {error}"] if error else []
    rows = published_layouts.of_section(rows, "llama")   # Llama 3's (contract/models/llama3.py), not DLPerf's GPT
    ours, beside = [], []
    kinds = memory_kinds(llama_rows)
    for point in llama_rows.sort_values("point").itertuples():
        manifest = results.manifest(point.sweep, point.point)
        ours.append(_ours(point, manifest, kinds))
        matches = published_layouts.find(point_layout(manifest, point.device), rows) if point.device else []
        beside += [[point.point] + _published(row) for row in matches]
    text = ("## llama3: tokens/s, TFLOP/s per device and MFU, by layout\n"
            "FLOPs a sequence 6 N s + 12 l h s (s + 1) / 2 (N: parameters less the embedding; the "
            "attention over the causal pairs; no recompute term: contract/flops.py, docs/flops.md); "
            "MFU, their count: the same speed counted as torchtitan and dgxc-benchmarking count it, "
            "6 N + 12 l h s a token (the full s x s), the figure their MFU compares with; "
            f"MFU against the device's dense peak {peak_note(llama_rows)}; "
            "latency: one iteration (the global batch); tokens/s: the global batch's; memory: "
            f"the largest rank's peak of {memory_note(kinds)}\n\n"
            + tabulate(ours, headers=HEADERS, tablefmt="github", disable_numparse=True))
    if beside:
        text += ("\n\n### Published beside it (the same layout, shape, batch, precision and device)\n"
                 "As published: dgxc-benchmarking's MFU is against the H100's dense BF16 peak (989 "
                 "TFLOP/s), its FP8 rows' against the FP8 peak (1979); torchtitan publishes no MFU. "
                 "* = derived here (the job's tokens/s / GPUs).\n\n"
                 + tabulate(beside, headers=["our point"] + PUBLISHED_HEADERS, tablefmt="github",
                            disable_numparse=True))
    elif len(llama_rows):
        text += ("\n\nNo published Llama 3 figure has this layout on this device "
                 "(analysis/published/dgxc_llama3.1_h100.yaml, torchtitan_llama3.yaml; "
                 "docs/llama3.md lists the configurations to run).")
    return "\n".join(notes + [text])
