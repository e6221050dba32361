"""The input pipeline in the report (docs/data.md): per framework, training from files
(`data=files`), training on synthetic data and the pipeline alone (`bench=input`) side by
side, in samples/s per device; and the pipeline alone by worker count.

Training from files is called input-bound when it is within INPUT_BOUND (10%) of the
pipeline alone and clearly below synthetic (at most 1 - INPUT_BOUND of it): the pipeline,
not the model, sets its pace. A point's data settings come from its point.json
(Results.manifests); a bench=input point's rate from its ranks' timed steps and windows
(analysis.load computes throughput for training only) by the method's rule
(method.repeat_throughput, a training repeat's too): all ranks' timed samples over the
longest rank's timed window, the median over ok repeats.
"""
import pandas as pd
from tabulate import tabulate

from analysis import tables
from analysis.figures import method
from analysis.figures.training import with_data

INPUT_BOUND = 0.10
# What must match for two points to differ only in `data` (and bench: train or input).
KEY = ["framework", "model", "model_size", "precision", "batch_size", "mode", "nodes",
       "gpus_per_node"]
# The pipeline alone has no precision or mode; it matches on what it reads, and how.
PIPELINE_KEY = ["framework", "model", "model_size", "batch_size", "nodes", "gpus_per_node",
                "workers"]


def pipeline_rates(results, points: pd.DataFrame) -> dict:
    """point -> the pipeline alone's median samples/s over its ok repeats (a repeat with a
    rank that recorded no timed window has no figure)."""
    wanted, runs = set(points.point), results.runs
    ok = {(p, r) for p, r, s in zip(runs.point, runs.repeat, runs.status) if s == "ok"}
    windows = {(e["point"], e["repeat"], e["rank"]): e["window"] for e in results.environments
               if e["point"] in wanted}
    steps = results.steps
    steps = steps[(steps.phase == "measure") & steps.point.isin(wanted)]
    repeats: dict = {}
    for (point, repeat, rank), samples in steps.groupby(["point", "repeat", "rank"],
                                                        observed=True).samples:
        if (point, repeat) in ok:
            window = windows.get((point, repeat, rank))
            repeats.setdefault((point, repeat), []).append(
                None if window is None else method.rank_timing(samples.to_numpy(), window))
    per_point: dict = {}
    for (point, _), timings in repeats.items():
        if None not in timings:
            per_point.setdefault(point, []).append(method.repeat_throughput(timings))
    return {p: method.median_of(per_point[p]) for p in points.point if p in per_point}


def _cell(row, value) -> str:
    """A point's samples/s per device: "-" without the point, its status where it failed."""
    if row is None:
        return "-"
    return tables.label(row.status) if row.status in tables.LABELS else tables.number(value, ".1f")


def section(results) -> str:
    pts = results.points
    if pts.empty or "bench" not in pts:
        return ""
    pts = with_data(results, pts[pts.bench.isin(["train", "input"])])
    if not ((pts.data == "files").any()):
        return ""
    rates = pipeline_rates(results, pts[pts.bench == "input"])
    total = [rates.get(r.point) if r.bench == "input" else r.throughput for r in pts.itertuples()]
    # pandas-stubs' assign takes no None in a list (pandas reads it as a missing value)
    pts = pts.assign(per_device=[None if t is None else t / d for t, d in zip(total, pts.devices)])  # type: ignore[misc]
    synthetic = {tuple(getattr(r, k) for k in KEY): r
                 for r in pts[(pts.bench == "train") & (pts.data == "synthetic")].itertuples()}
    alone = {tuple(getattr(r, k) for k in PIPELINE_KEY): r
             for r in pts[pts.bench == "input"].itertuples()}
    rows = []
    for r in pts[(pts.bench == "train") & (pts.data == "files")].itertuples():
        syn = synthetic.get(tuple(getattr(r, k) for k in KEY))
        pipe = alone.get(tuple(getattr(r, k) for k in PIPELINE_KEY))
        rows.append([r.framework, r.model, r.precision, r.batch_size, r.mode,
                     tables.allocation(r.nodes, r.gpus_per_node), r.workers,
                     _cell(syn, syn and syn.per_device),
                     _cell(r, r.per_device), _cell(pipe, pipe and pipe.per_device),
                     verdict(r, syn, pipe)])
    parts = []
    if rows:
        parts.append("### Training from files, on synthetic data, and the pipeline alone "
                     "(samples/s per device)\n" + tabulate(
                         sorted(rows, key=lambda x: [str(v) for v in x]),
                         headers=["framework", "model", "precision", "batch/dev", "mode", "NxG",
                                  "workers", "synthetic", "files", "pipeline alone", "verdict"],
                         tablefmt="github", disable_numparse=True)
                     + f"\ninput-bound: files within {INPUT_BOUND:.0%} of the pipeline alone and "
                       f"below {1 - INPUT_BOUND:.0%} of synthetic")
    parts.append(workers_table(pts[pts.bench == "input"]))
    return "## Input pipeline (data=files)\n\n" + "\n\n".join(p for p in parts if p)


def verdict(files, syn, pipe) -> str:
    """input-bound, not input-bound, or what is missing to say."""
    f = files.per_device if files.status in ("ok", "partial") else None
    s = syn.per_device if syn is not None and syn.status in ("ok", "partial") else None
    p = pipe.per_device if pipe is not None and pipe.status in ("ok", "partial") else None
    if f is None or s is None or p is None or any(tables.missing(v) for v in (f, s, p)):
        return "n/a: needs " + " and ".join(
            n for n, v in (("files", f), ("synthetic", s), ("pipeline alone", p)) if tables.missing(v))
    bound = f >= (1 - INPUT_BOUND) * p and f <= (1 - INPUT_BOUND) * s
    return f"{'input-bound' if bound else 'not input-bound'} ({f / s:.0%} of synthetic)"


def workers_table(inputs: pd.DataFrame) -> str:
    """The pipeline alone: samples/s per rank, a column per worker count."""
    if inputs.empty:
        return ""
    counts = sorted(inputs.workers.unique(), key=lambda w: (w == "auto", int(w) if w != "auto" else 0))
    grid: dict = {}
    for r in inputs.itertuples():
        key = (r.framework, r.model, r.batch_size, tables.allocation(r.nodes, r.gpus_per_node))
        grid.setdefault(key, {})[r.workers] = _cell(r, r.per_device)
    rows = [[*k, *(grid[k].get(w, "-") for w in counts)] for k in sorted(grid, key=str)]
    return ("### The pipeline alone (bench=input: samples/s per rank, by loader workers)\n"
            + tabulate(rows, headers=["framework", "model", "batch/rank", "NxG",
                                      *(f"workers={w}" for w in counts)],
                       tablefmt="github", disable_numparse=True))
