"""What the report's plots draw, aggregated from analysis.load's Results without matplotlib:
the training points (one row each), each model's step-time spread per rank (one row a
rank, never the steps themselves), the comm table and the checkpoint table; and what comes
back (Plot).

Small on purpose: analysis/plots/draw.py draws from it, in a second process while the tables are
written (analysis/plots/process.py), so it travels between processes whole. At a million
step records it is the points, plus one row per rank of one point per model.
"""
import os
from typing import NamedTuple

import numpy as np
import pandas as pd

from analysis import tables
from analysis.figures.checkpoint import checkpoint_table
from analysis.figures.training import training_points

# The plots (analysis/plots/draw.py's titles) drawn from `spreads`; the others need the points
# only.
FROM_STEPS = ("step time per rank",)
FROM_POINTS = ("throughput", "scaling", "AMP over FP32", "bus bandwidth", "checkpoint")
WHIS = 1.5        # whiskers at the furthest step within 1.5 IQR of the box (matplotlib's)
MAX_BOXES = 64    # more ranks than this: a box each would be a black band; quantiles instead


class Plot(NamedTuple):
    """A drawn plot (analysis/plots/draw.py): its file name in the report folder, its PNG."""
    name: str
    png: bytes


def write(plots, out_dir) -> list:
    """Write each plot as its PNG file in out_dir; returns the paths."""
    paths = []
    for p in plots:
        path = os.path.join(str(out_dir), p.name)
        with open(path, "wb") as f:
            f.write(p.png)
        paths.append(path)
    return paths


class RankSpread(NamedTuple):
    model: str
    point: pd.Series      # the point's row: the most ranks, of those the worst straggler
    repeats: int          # its ok repeats, whose timed steps these are
    ranks: pd.DataFrame   # a row per rank: rank, host, steps, ms (p10 q1 med q3 p90 min max),
    #                       whislo, whishi, fliers (ms outside the whiskers; up to MAX_BOXES ranks)


class PlotData(NamedTuple):
    points: pd.DataFrame  # the training points of the main tables, with mode and allocation
    spreads: list         # a RankSpread per model that has timed steps of an ok repeat
    comm: pd.DataFrame    # analysis.figures.comm.comm_table(results), or None
    checkpoint: pd.DataFrame | None = None  # figures.checkpoint.checkpoint_table(results), or None


def numeric(series) -> pd.Series:
    return pd.to_numeric(series, errors="coerce")


def train_points(results) -> pd.DataFrame:
    """The training points the plots draw, those of the report's main tables
    (analysis/figures/training.py), with their mode and allocation ("NxG")."""
    train = training_points(results)
    if not len(train):
        return train
    return train.assign(mode=[tables.mode_of(r) for r in train.itertuples()],
                        allocation=[tables.allocation(n, g)
                                    for n, g in zip(train.nodes, train.gpus_per_node)])


def _by_rank_then_time(rank, ms, host):
    """rank, ms and host sorted by rank, then duration, and the number of steps every rank
    has where they all have as many (else None). The records' own order (every rank's steps
    together, ranks ascending, as many steps each) sorts as a matrix of durations, a row a
    rank, in place (`ms` is the caller's to reorder), its ranks and hosts staying where they
    are: 20 times faster than a lexsort of a million."""
    n = len(rank)
    if n and rank[0] == 0 and n % (rank[-1] + 1) == 0:
        k = n // (rank[-1] + 1)
        if (rank.reshape(-1, k) == np.arange(rank[-1] + 1)[:, None]).all():
            ms.reshape(-1, k).sort(axis=1)
            return rank, ms, host, k
    order = np.lexsort((ms, rank))
    return rank[order], ms[order], host[order], None


def rank_stats(steps: pd.DataFrame, boxes: bool | None = None) -> pd.DataFrame:
    """Per rank, the spread of its timed steps (`steps`: rank, duration in s, host) in ms:
    quantiles by linear interpolation (numpy's, as matplotlib's boxplot takes them), the
    whiskers at the furthest step within WHIS IQR of the box and, when `boxes` (by default
    when a box is drawn per rank: up to MAX_BOXES ranks), the steps beyond them. One sort
    for all ranks: 25 ms at a million steps (benchmarks/analysis_scale.md)."""
    rank, ms, hosts, k = _by_rank_then_time(steps["rank"].to_numpy(),
                                            steps.duration.to_numpy(np.float64) * 1e3,
                                            steps.host.cat.codes.to_numpy())
    first = np.flatnonzero(np.r_[True, rank[1:] != rank[:-1]])   # sorted: no np.unique's sort
    names, counts = rank[first], np.diff(np.r_[first, len(rank)])
    last = first + counts - 1

    def q(p):   # numpy's "linear": the value at (n - 1) * p, interpolated
        pos = first + p * (counts - 1)
        lo = np.floor(pos).astype(np.int64)
        return ms[lo] + (ms[np.minimum(lo + 1, last)] - ms[lo]) * (pos - lo)

    p10, q1, med, q3, p90 = (q(p) for p in (0.1, 0.25, 0.5, 0.75, 0.9))
    reach_lo, reach_hi = q1 - WHIS * (q3 - q1), q3 + WHIS * (q3 - q1)
    if k is not None:     # a row a rank: each row against its own reach
        rows = ms.reshape(-1, k)
        lo = first + np.count_nonzero(rows < reach_lo[:, None], axis=1)
        hi = first + np.count_nonzero(rows <= reach_hi[:, None], axis=1) - 1
    else:
        each = np.repeat(np.arange(len(first)), counts)   # each step's rank, as an index
        lo = first + np.add.reduceat(ms < reach_lo[each], first, dtype=np.int64)
        hi = first + np.add.reduceat(ms <= reach_hi[each], first, dtype=np.int64) - 1
    out = pd.DataFrame({"rank": names.astype(int), "host": steps.host.cat.categories[hosts[first]]
                        .astype(str), "steps": counts, "p10": p10, "q1": q1, "med": med, "q3": q3,
                        "p90": p90, "min": ms[first], "max": ms[last],
                        # no step between a quartile and its reach: the whisker at the
                        # quartile, as matplotlib's boxplot_stats puts it
                        "whislo": np.minimum(ms[lo], q1), "whishi": np.maximum(ms[hi], q3)})
    if boxes is None:
        boxes = len(first) <= MAX_BOXES
    out["fliers"] = ([np.concatenate([ms[a:i], ms[j + 1:b + 1]])
                      for a, b, i, j in zip(first, last, lo, hi)] if boxes else None)
    return out


def rank_spreads(results, train: pd.DataFrame) -> list:
    """Per model, its point with the most ranks (of those the worst straggler ratio) and
    the spread of each rank's timed steps over its ok repeats."""
    ok = train[numeric(train.throughput).notna()] if len(train) else train
    ok = ok[~ok.point.duplicated(keep=False)] if len(ok) else ok   # steps name points, not sweeps
    if not len(ok) or not results.step_count():
        return []
    out = []
    for model, pts in ok.groupby("model"):
        p = pts.assign(_s=numeric(pts.straggler).fillna(0)).sort_values(
            ["devices", "_s"], ascending=False).iloc[0]
        mine = results.runs_of(p.sweep, p.point)
        good = set(mine[mine.status == "ok"].repeat) if len(mine) else set()
        steps = results.timed_steps(p.point, good)
        if len(steps):
            out.append(RankSpread(str(model), p.drop(labels="_s"), len(good), rank_stats(steps)))
    return out


def of(results, comm=None, spreads: bool = True) -> PlotData:
    """The plots' data of `results`; `comm`: analysis.figures.comm.comm_table(results); without
    `spreads`, only what the FROM_POINTS plots need."""
    train = train_points(results)
    return PlotData(train, rank_spreads(results, train) if spreads else [], comm,
                    checkpoint_table(results))
