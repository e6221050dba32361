"""Each point's figures as one table, for every model: what the report's special sections
(analysis/special.py) and the regression gate (analysis/compare.py) both read.

A function of what analysis.load read (the points' settings: Results.manifests); it
imports no module of the report, so every consumer imports it without a circle.
"""
import pandas as pd

from analysis import flops

MODEL_KEYS = ("deep_vocab_size", "embedding", "seq_len", "num_classes")  # what tells a special point apart


def _median(values):
    values = [v for v in values if v is not None and v == v]
    return float(pd.Series(values).median()) if values else None


def _value(p, column):
    v = getattr(p, column, None)
    return None if v is None or (isinstance(v, float) and v != v) else v


def metrics(results) -> pd.DataFrame:
    """One row per point: its configuration and figures (None where they do not apply).

    latency_ms = the timed window (longest rank) / timed steps, median over ok repeats;
    timed steps = the repeat's timed samples / (batch x ranks), from the records.
    peak_memory_bytes = the largest rank's peak over ok repeats: device memory where the
    ranks had a device, else host memory (peak RSS).
    tflops_per_device, peak_tflops, mfu: model FLOPs (analysis/flops.py) for every model
    with a count (resnet50, bert_base, gpt), as analysis.load put them in the points;
    tokens_per_s: GPT's samples/s x seq_len."""
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
        has_tp = p.throughput is not None and p.throughput == p.throughput
        if hasattr(p, "tflops_per_device"):      # analysis.load's figures
            row.update(tflops_per_device=_value(p, "tflops_per_device"),
                       peak_tflops=_value(p, "peak_tflops"), mfu=_value(p, "mfu"))
        elif has_tp:                             # points built by hand: the same rules
            row["tflops_per_device"] = flops.achieved_tflops_per_device(
                p.throughput, flops.flops_per_sample(model), p.devices)
            row["peak_tflops"] = flops.peak_tflops(device, p.precision, p.amp_dtype,
                                                   (point.get("config") or {}).get("peak_tflops"))
            row["mfu"] = flops.mfu(row["tflops_per_device"], row["peak_tflops"])
        if p.model in ("gpt", "llama3") and has_tp and model.get("seq_len"):  # language models
            row["tokens_per_s"] = p.throughput * model["seq_len"]
        rows.append(row)
    return pd.DataFrame(rows)
