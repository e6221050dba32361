"""The checkpoint's figures (docs/checkpoint.md): a row per bench=checkpoint point
(`checkpoint_table`) and per training point with checkpoint.every beside the same point
without (`training_table`), for the report's section (analysis/sections/checkpoint.py) and its
plot of GB/s against nodes (analysis/plots/checkpoint.py). Reads no file: the records come from
analysis.load (each rank's `checkpoint` in `Results.environments`).

The rules, one place:
- a repeat's figure takes the slowest rank's time (a checkpoint is whole once every rank's
  part is) and the bytes of all ranks: GB/s = bytes / time, 1 GB = 1e9 bytes; per node =
  GB/s / nodes; the bare write's likewise, with its own bytes and its slowest rank;
- `ratio` = the checkpoint's durable GB/s / the bare write's GB/s (1: DCP costs nothing over
  the filesystem; 0.5: it takes twice as long), `load_ratio` the load's over the bare read's;
- a point's figure is the median over its ok repeats (analysis/figures/method.py), a failed repeat
  (a load not equal to the save, a named storage ending) never a speed.
"""
import json

import pandas as pd

from analysis import tables
from analysis.figures import method
from analysis.tables import layout_label

GB = 1e9
TIMES = ("blocked_s", "durable_s", "load_s", "bare_write_s", "bare_read_s")
FIGURES = ("bytes", *TIMES, "gbps", "gbps_per_node", "load_gbps", "bare_gbps", "bare_read_gbps",
           "ratio", "load_ratio")
COLUMNS = ["sweep", "point", "model", "size", "layout", "nodes", "gpus_per_node", "ranks", "mode",
           "device", "status", "error", "n_ok", *FIGURES]


def _rate(nbytes, seconds):
    return nbytes / seconds / GB if seconds and seconds > 0 else None


def repeat_figures(ranks, nodes: int) -> dict:
    """One repeat's figures from its ranks' `checkpoint` records (the module's rules).
    KeyError where a rank lacks a figure (the repeat did not finish its timed cycle)."""
    ranks = list(ranks)
    slowest = {k: max(r[k] for r in ranks) for k in TIMES}
    nbytes, bare = sum(r["bytes"] for r in ranks), sum(r["bare_bytes"] for r in ranks)
    gbps, load = _rate(nbytes, slowest["durable_s"]), _rate(nbytes, slowest["load_s"])
    bare_gbps, bare_read = _rate(bare, slowest["bare_write_s"]), _rate(bare, slowest["bare_read_s"])
    return {"bytes": nbytes, **slowest, "gbps": gbps,
            "gbps_per_node": None if gbps is None else gbps / nodes, "load_gbps": load,
            "bare_gbps": bare_gbps, "bare_read_gbps": bare_read,
            "ratio": gbps / bare_gbps if gbps and bare_gbps else None,
            "load_ratio": load / bare_read if load and bare_read else None}


def _by_repeat(results, sweep, point) -> dict:
    """repeat -> its ranks' checkpoint records."""
    out: dict = {}
    for e in results.environments:
        if e["sweep"] == sweep and e["point"] == point and isinstance(e.get("checkpoint"), dict):
            out.setdefault(e["repeat"], []).append(e["checkpoint"])
    return out


def _ok_repeats(results, sweep, point) -> set:
    runs = results.runs_of(sweep, point)
    return set(runs[runs.status == "ok"].repeat) if len(runs) else set()


def checkpoint_table(results) -> pd.DataFrame:
    """One row per bench=checkpoint point: its figures, the median over its ok repeats."""
    p = results.points
    rows = []
    for r in (p[p.bench == "checkpoint"].itertuples() if len(p) else ()):
        manifest = results.manifest(r.sweep, r.point)
        cfg = (manifest.get("config") or {}).get("checkpoint") or {}
        ok, ranks = _ok_repeats(results, r.sweep, r.point), _by_repeat(results, r.sweep, r.point)
        figures = []
        for repeat in sorted(ok):
            try:
                figures.append(repeat_figures(ranks.get(repeat, ()), r.nodes))
            except (KeyError, TypeError, ValueError):   # an ok repeat without its figures
                continue
        row = {"sweep": r.sweep, "point": r.point, "model": r.model, "size": r.model_size,
               "layout": layout_label(manifest.get("parallel") or {}), "nodes": r.nodes,
               "gpus_per_node": r.gpus_per_node, "ranks": r.devices, "mode": cfg.get("mode"),
               "device": r.device, "status": r.status, "error": r.error, "n_ok": len(figures)}
        row.update({k: method.median_of(f[k] for f in figures) for k in FIGURES})
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def _training_key(manifest: dict) -> str:
    """What a training point is, its checkpoint settings aside: its baseline has the same."""
    keys = ("framework", "model", "parallel", "precision", "amp_dtype", "compile", "batch_size",
            "nodes", "gpus_per_node", "warmup_steps", "measure_steps", "device", "seed")
    return json.dumps({k: manifest.get(k) for k in keys}, sort_keys=True, default=str)


def training_table(results) -> pd.DataFrame:
    """One row per training point with checkpoint.every: its throughput beside the same point's
    without checkpoints (the same sweep's where there is one), their ratio, and per save the
    slowest rank's blocking and durable times (medians over the timed saves of ok repeats)."""
    p = results.points
    train = p[p.bench == "train"] if len(p) else p
    every: list = []
    base: dict = {}
    for r in train.itertuples():
        m = results.manifest(r.sweep, r.point)
        cfg = (m.get("config") or {}).get("checkpoint") or {}
        if cfg.get("every"):
            every.append((r, m, cfg))
        else:
            base.setdefault(_training_key(m), []).append(r)
    rows = []
    for r, m, cfg in every:
        same = base.get(_training_key(m), [])
        b = next((x for x in same if x.sweep == r.sweep), same[0] if same else None)
        saves = _saves(results, r.sweep, r.point)
        rows.append({"point": r.point, "model": r.model, "layout": layout_label(m.get("parallel") or {}),
                     "nodes": r.nodes, "gpus_per_node": r.gpus_per_node, "every": cfg["every"],
                     "mode": cfg.get("mode"), "status": r.status,
                     "saves": saves["count"], "blocked_s": saves["blocked_s"],
                     "durable_s": saves["durable_s"], "throughput": r.throughput,
                     "baseline": None if b is None else b.point,
                     "baseline_throughput": None if b is None else b.throughput,
                     "ratio": (r.throughput / b.throughput if b is not None and not tables.missing(r.throughput)
                               and not tables.missing(b.throughput) and b.throughput else None)})
    return pd.DataFrame(rows)


def _saves(results, sweep, point) -> dict:
    """The timed saves of a point's ok repeats: how many a repeat made, and the medians of
    each save's slowest-rank blocking and durable times."""
    ok = _ok_repeats(results, sweep, point)
    per: dict = {}
    for e in results.environments:
        c = e.get("checkpoint")
        if e["sweep"] == sweep and e["point"] == point and e["repeat"] in ok and isinstance(c, dict):
            for s in c.get("saves") or ():
                if s.get("timed"):
                    per.setdefault((e["repeat"], s["step"]), []).append(s)
    counts: dict = {}
    for repeat, _ in per:
        counts[repeat] = counts.get(repeat, 0) + 1

    def slowest(key):
        return method.median_of(max(s.get(key) or 0 for s in ranks) for ranks in per.values())

    return {"count": method.median_of(counts.values()), "blocked_s": slowest("blocked_s"),
            "durable_s": slowest("durable_s")}
