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
    ok = {(point, repeat) for point, repeat, status in zip(runs.point, runs.repeat, runs.status)
          if status == "ok"}
    windows = {(rank["point"], rank["repeat"], rank["rank"]): rank["window"] for rank in results.environments
               if rank["point"] in wanted}
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
    return {point: method.median_of(per_point[point]) for point in points.point if point in per_point}


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
    total = [rates.get(row.point) if row.bench == "input" else row.throughput for row in pts.itertuples()]
    # pandas-stubs' assign takes no None in a list (pandas reads it as a missing value)
    pts = pts.assign(per_device=[None if rate is None else rate / devices  # type: ignore[misc]
                                 for rate, devices in zip(total, pts.devices)])
    synthetic = {tuple(getattr(row, column) for column in KEY): row
                 for row in pts[(pts.bench == "train") & (pts.data == "synthetic")].itertuples()}
    alone = {tuple(getattr(row, column) for column in PIPELINE_KEY): row
             for row in pts[pts.bench == "input"].itertuples()}
    rows = []
    for files in pts[(pts.bench == "train") & (pts.data == "files")].itertuples():
        syn = synthetic.get(tuple(getattr(files, column) for column in KEY))
        pipe = alone.get(tuple(getattr(files, column) for column in PIPELINE_KEY))
        rows.append([files.framework, files.model, files.precision, files.batch_size, files.mode,
                     tables.allocation(files.nodes, files.gpus_per_node), files.workers,
                     _cell(syn, syn and syn.per_device),
                     _cell(files, files.per_device), _cell(pipe, pipe and pipe.per_device),
                     verdict(files, syn, pipe)])
    parts = []
    if rows:
        parts.append("### Training from files, on synthetic data, and the pipeline alone "
                     "(samples/s per device)\n" + tabulate(
                         sorted(rows, key=lambda row: [str(cell) for cell in row]),
                         headers=["framework", "model", "precision", "batch/dev", "mode", "NxG",
                                  "workers", "synthetic", "files", "pipeline alone", "verdict"],
                         tablefmt="github", disable_numparse=True)
                     + f"\ninput-bound: files within {INPUT_BOUND:.0%} of the pipeline alone and "
                       f"below {1 - INPUT_BOUND:.0%} of synthetic")
    parts.append(workers_table(pts[pts.bench == "input"]))
    return "## Input pipeline (data=files)\n\n" + "\n\n".join(part for part in parts if part)


def verdict(files, syn, pipe) -> str:
    """input-bound, not input-bound, or what is missing to say."""
    from_files = files.per_device if files.status in ("ok", "partial") else None
    on_synthetic = syn.per_device if syn is not None and syn.status in ("ok", "partial") else None
    pipeline = pipe.per_device if pipe is not None and pipe.status in ("ok", "partial") else None
    rates = (("files", from_files), ("synthetic", on_synthetic), ("pipeline alone", pipeline))
    if from_files is None or on_synthetic is None or pipeline is None \
            or any(tables.missing(rate) for _, rate in rates):
        return "n/a: needs " + " and ".join(name for name, rate in rates if tables.missing(rate))
    bound = from_files >= (1 - INPUT_BOUND) * pipeline and from_files <= (1 - INPUT_BOUND) * on_synthetic
    return f"{'input-bound' if bound else 'not input-bound'} ({from_files / on_synthetic:.0%} of synthetic)"


def workers_table(inputs: pd.DataFrame) -> str:
    """The pipeline alone: samples/s per rank, a column per worker count."""
    if inputs.empty:
        return ""
    counts = sorted(inputs.workers.unique(), key=lambda w: (w == "auto", int(w) if w != "auto" else 0))
    grid: dict = {}
    for row in inputs.itertuples():
        key = (row.framework, row.model, row.batch_size, tables.allocation(row.nodes, row.gpus_per_node))
        grid.setdefault(key, {})[row.workers] = _cell(row, row.per_device)
    rows = [[*key, *(grid[key].get(workers, "-") for workers in counts)] for key in sorted(grid, key=str)]
    return ("### The pipeline alone (bench=input: samples/s per rank, by loader workers)\n"
            + tabulate(rows, headers=["framework", "model", "batch/rank", "NxG",
                                      *(f"workers={workers}" for workers in counts)],
                       tablefmt="github", disable_numparse=True))
