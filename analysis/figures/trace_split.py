"""A GPU trace's time split into compute, communication not hidden by compute, other non-compute
and idle: HolisticTraceAnalysis's temporal breakdown (`get_temporal_breakdown`) and its
communication-computation overlap (`get_comm_comp_overlap`), computed the same way from the
trace's GPU kernel intervals (docs/anatomy.md; the rule's one home).

Over one rank's trace, from the first GPU event's start to the last one's end (HTA's "kernel
time", `span`), with every stream's intervals merged:
    idle        the span less the union of every GPU event (no stream busy);
    compute     the union of the computation kernels;
    non-compute the union of every event less compute (HTA's non_compute_time), split into
                communication not hidden by compute (NCCL kernels while no computation
                kernel runs) and the rest (copies, memsets, synchronisations, likewise);
    overlap     the share of communication time during which a computation kernel runs.
A kernel's kind is HTA's: communication where its name starts with `nccl` (or holds `gloo:`),
memory where it starts with Memcpy, Memset or dma, other where it holds Memcpy or Sync, else
computation.
"""
import re

import pandas as pd

COMPUTE, COMM, OTHER = "compute", "communication", "other"
_COMM = re.compile(r"^nccl|gloo:")
_NOT_COMPUTE = re.compile(r"^(Memcpy|Memset|dma)|Memcpy|Sync")


def kind(name: str) -> str:
    """A GPU event's kind by its name, as HTA classifies kernels."""
    if _COMM.search(name):
        return COMM
    return OTHER if _NOT_COMPUTE.search(name) else COMPUTE


def split(events: pd.DataFrame) -> dict | None:
    """{span_us, compute_us, exposed_comm_us, exposed_other_us, idle_us, comm_us, overlap,
    kernels} of one rank's GPU events (`events`: columns name, ts, dur in microseconds), or
    None where there is none."""
    if not len(events):
        return None
    kinds = events["name"].astype(str).map(kind)
    start, end = events["ts"].astype(float), events["ts"].astype(float) + events["dur"].astype(float)
    edges = pd.concat([pd.DataFrame({"t": start, "kind": kinds, "d": 1}),
                       pd.DataFrame({"t": end, "kind": kinds, "d": -1})])
    # running counts of each kind's events between consecutive edges
    running = (edges.pivot_table(index="t", columns="kind", values="d", aggfunc="sum", fill_value=0)
               .reindex(columns=[COMPUTE, COMM, OTHER], fill_value=0).sort_index().cumsum())
    length = pd.Series(running.index, index=running.index).diff().shift(-1).fillna(0.0)
    comp, comm, other = (running[k] > 0 for k in (COMPUTE, COMM, OTHER))

    def total(mask) -> float:
        return float(length[mask].sum())

    span = float(end.max() - start.min())
    comm_us = total(comm)
    return {"span_us": span, "compute_us": total(comp), "exposed_comm_us": total(comm & ~comp),
            "exposed_other_us": total(other & ~comp & ~comm),
            "idle_us": total(~(comp | comm | other)), "comm_us": comm_us,
            "overlap": total(comm & comp) / comm_us if comm_us else None, "kernels": len(events)}


def shares(s: dict) -> dict:
    """The split's parts as fractions of its span: compute, exposed_comm, exposed_other, idle."""
    span = s["span_us"] or float("nan")
    return {k: s[f"{k}_us"] / span for k in ("compute", "exposed_comm", "exposed_other", "idle")}


def text(s) -> str:
    """One line: the split's shares of the GPU's time, its span and the overlap."""
    if s is None:
        return "no GPU kernels in the trace (a CPU's trace: the split is a GPU's)"
    f = shares(s)
    overlap = "" if s["overlap"] is None else f"; {s['overlap']:.0%} of communication hidden by compute"
    return (f"compute {f['compute']:.1%}, communication not hidden {f['exposed_comm']:.1%}, other "
            f"non-compute {f['exposed_other']:.1%}, idle {f['idle']:.1%} of {s['span_us'] / 1e3:,.1f} ms "
            f"of GPU time ({s['kernels']} kernels){overlap}")
