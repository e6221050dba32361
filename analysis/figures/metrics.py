"""Each point's figures as one table, for every model: what the report's special sections
(analysis/sections/special.py) and the regression gate (analysis/gate/compare.py) both read.

A function of what analysis.load read (the points' settings: Results.manifests); it
imports no module of the report, so every consumer imports it without a circle.
"""
import pandas as pd

from analysis import tables
from analysis.figures import flops, method
from contract import models, parallel

# A training point's figures: a collective's or a checkpoint's point has none of them
TRAINING = ("throughput", "latency_ms", "tokens_per_s", "tflops_per_device", "mfu")
# What tells a model's points apart in a reference (its spec's compare_keys), every model's
MODEL_KEYS = tuple(dict.fromkeys(k for n in models.names() for k in models.get(n).compare_keys))
# The timed window's energy (contract/energy.py), the points' columns
ENERGY = ("energy_per_sample_j", "energy_per_token_j", "power_per_device_w", "energy_too_short",
          "energy_reason")
SHAPE_KEYS = ("hidden", "heads", "layers", "vocab_size", "recompute")      # a transformer's shape
# A rank's peak memory in the record, in the order the figure is taken: device memory (the
# GPU allocator's max_memory_allocated), a CPU rank's live tensors (what that counts, counted
# by PyTorch's layouts: frameworks/pytorch/layouts/tensor_memory.py), its host peak RSS (ru_maxrss:
# also the interpreter and libraries, and what glibc's malloc keeps of freed blocks).
MEMORY_KINDS = {"device": "peak_device_bytes", "tensors": "peak_tensor_bytes", "host": "peak_host_bytes"}
MEMORY_WORDS = {
    "device": "device memory (the GPU allocator's peak, max_memory_allocated)",
    "tensors": "live tensors (a CPU rank's, counted over one untimed iteration after the timed "
               "window, as max_memory_allocated counts a GPU's)",
    "host": "host peak RSS (the whole process: also the interpreter and libraries, and what "
            "malloc keeps of freed blocks)"}


def memory_kinds(frame) -> list:
    """The memory kinds of a frame of metrics' rows (its points that recorded one)."""
    return list(frame.memory_kind.dropna()) if "memory_kind" in frame else []


def memory_note(kinds) -> str:
    """What a table's memory figures are, for the memory kinds of its points; with more than
    one, each cell says its kind (memory_cell)."""
    kinds = [k for k in MEMORY_KINDS if k in set(kinds)]
    if not kinds:
        return "n/a"
    if len(kinds) == 1:
        return MEMORY_WORDS[kinds[0]]
    return "; ".join(f"{k[0]}: {MEMORY_WORDS[k]}" for k in kinds)


def memory_cell(gib: str, kind, kinds) -> str:
    """A memory figure as a table shows it: with its kind's letter where kinds are mixed."""
    return f"{gib} {kind[0]}" if len({k for k in kinds if k}) > 1 and kind else gib
LAYOUT_KEYS = ("dp", "tp", "pp", "fsdp", "schedule", "virtual_stages", "sequence_parallel",
               "micro_batch_size", "accumulation", "cp", "ep")


def _value(p, column):
    v = getattr(p, column, None)
    return None if tables.missing(v) else v


def metrics(results) -> pd.DataFrame:
    """One row per point: its configuration and figures (None where they do not apply).

    latency_ms = the timed window (longest rank) / timed steps, median over ok repeats;
    timed steps = the repeat's timed samples / (batch x ranks), from the records.
    peak_memory_bytes = the largest rank's peak over ok repeats, of the first kind the ranks
    recorded (memory_kind, MEMORY_KINDS): device memory (a GPU's allocator), else a CPU
    rank's live tensors (PyTorch's layouts), else host memory (peak RSS).
    tflops_per_device, peak_tflops, mfu: model FLOPs (analysis/figures/flops.py) for every model
    with a count (its spec's, contract/models/), as analysis.load put them in the points;
    pflops: tflops_per_device x devices / 1000 (aggregate);
    published_tflops_per_device, published_mfu: the same in the count of the model's published
    figures, where its spec gives one (Llama 3's full s x s, Megatron's GPT; docs/flops.md);
    tokens_per_s: a language model's (its spec says) samples/s x seq_len.
    energy_per_sample_j, energy_per_token_j, power_per_device_w, energy_too_short,
    energy_reason: the timed window's energy (contract/energy.py), as analysis.load put them.
    A layout's point (contract/parallel.py) adds its grid and batch sizes
    (LAYOUT_KEYS, global_batch_size: the samples of one iteration, whose latency is
    latency_ms), its shape (SHAPE_KEYS), its case, and a pipeline's bubble: the ideal one
    and the measured one (the mean over ranks of each ok repeat's, median over repeats)."""
    bubbles = _bubbles(results)
    rows = []
    for p in results.points.itertuples():
        point = results.manifest(p.sweep, p.point)
        model = point.get("model") or {}
        mine = results.runs_of(p.sweep, p.point)
        ok = mine[mine.status == "ok"] if len(mine) else mine
        lay = point.get("parallel") if isinstance(point.get("parallel"), dict) else {}
        grid = parallel.Layout.of(lay) if lay else None
        per_iteration = lay.get("global_batch_size") or p.batch_size * p.devices
        latency = method.median_of(r.window_s / (r.samples / per_iteration) * 1e3 for r in ok.itertuples()
                          if r.samples)
        memory = _peak_memory(ok)
        devices = [d for d in mine.get("device", []) if isinstance(d, str)]
        device = devices[0] if devices else None
        search = point.get("search") if isinstance(point.get("search"), dict) else {}
        row = {"point": p.point, "sweep": p.sweep, "status": p.status, "bench": getattr(p, "bench", "train"),
               "framework": p.framework,
               "model": p.model, "model_size": p.model_size, "precision": p.precision,
               "amp_dtype": p.amp_dtype, "batch_size": p.batch_size, "nodes": p.nodes,
               "gpus_per_node": p.gpus_per_node, "devices": p.devices, "compile": p.compile,
               "device": device, "throughput": p.throughput, "latency_ms": latency,
               "peak_memory_bytes": memory[1], "memory_kind": memory[0],
               "search": search.get("base"), "search_value": search.get("value"),
               "tokens_per_s": None, "tflops_per_device": None, "peak_tflops": None, "mfu": None}
        row.update({k: model.get(k) for k in MODEL_KEYS})
        row.update({k: model.get(k) for k in SHAPE_KEYS})
        row.update({k: lay.get(k) for k in LAYOUT_KEYS}, global_batch_size=per_iteration,
                   case=point.get("case"), layout=grid.key() if grid else None,
                   ideal_bubble=None, measured_bubble=None)
        if grid is not None and lay.get("pp", 1) > 1:
            row["ideal_bubble"] = parallel.ideal_bubble(grid)
            row["measured_bubble"] = method.median_of(bubbles.get((str(p.sweep), p.point, r.repeat))
                                             for r in ok.itertuples())
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
        if _language_model(p.model) and has_tp and model.get("seq_len"):
            row["tokens_per_s"] = p.throughput * model["seq_len"]
        row.update({k: _value(p, k) for k in ENERGY})
        row["pflops"] = (row["tflops_per_device"] * p.devices / 1e3
                         if row["tflops_per_device"] is not None else None)
        # the same speed in the count of the model's published figures, where that differs
        ratio = flops.published_ratio(dict(model, name=p.model)) if row["tflops_per_device"] is not None else None
        row["published_tflops_per_device"] = row["tflops_per_device"] * ratio if ratio else None
        row["published_mfu"] = row["mfu"] * ratio if ratio and not tables.missing(row["mfu"]) else None
        rows.append(row)
    return pd.DataFrame(rows)


def _language_model(name) -> bool:
    """Whether a model's samples are sequences (its spec; a name none declares: no)."""
    spec = models.find(name)
    return bool(spec and spec.language_model)


def _peak_memory(ok) -> tuple:
    """(kind, bytes) of the ok repeats' memory: the first of MEMORY_KINDS they recorded."""
    for kind, column in MEMORY_KINDS.items():
        peaks = [v for v in ok.get(column, []) if v == v and v is not None]
        if peaks:
            return kind, max(peaks)
    return None, None


def _bubbles(results) -> dict:
    """(sweep, point, repeat) -> the mean over its ranks of the measured pipeline bubble."""
    out: dict = {}
    for e in results.environments:
        pipe = e.get("pipeline")
        if pipe and pipe.get("measured_bubble") is not None:
            out.setdefault((str(e["sweep"]), e["point"], e["repeat"]), []).append(pipe["measured_bubble"])
    return {k: sum(v) / len(v) for k, v in out.items()}
