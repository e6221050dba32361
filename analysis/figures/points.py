"""The figures of the runs and points tables, by the method (analysis/figures/method.py): a
repeat's from its ranks' step columns (throughput, straggler ratio and host, drift), a
point's from its repeats' (the median, its interval, flags, step-time percentiles), then
each point's speedup over its 1-device baseline and its model FLOPs and MFU
(analysis/figures/flops.py).

Functions of rows and columns only: analysis/read/load.py reads the files and calls them.
"""
import numpy as np
import pandas as pd

from analysis import tables
from analysis.figures import flops, host_bound, method
from contract import energy, models, statuses

# What a point is of: its configuration (the points table's first columns, analysis/read/
# results.py); its speedup's baseline differs only in nodes, gpus_per_node and devices.
CONFIG_COLUMNS = ["bench", "framework", "model", "model_size", "precision", "amp_dtype",
                  "compile", "batch_size", "nodes", "gpus_per_node", "devices"]
# Model FLOPs and MFU (analysis/figures/flops.py): added once the points are known (add_flops).
FLOP_COLUMNS = ["flops_per_sample", "tflops_per_device", "peak_tflops", "math_dtype",
                "peak_source", "mfu"]
# The timed window's energy (contract/energy.py): a repeat's (runs) and a point's (points)
RUN_ENERGY_COLUMNS = ["energy_j", "energy_per_sample_j", "power_per_device_w", "energy_too_short",
                      "energy_reason"]
POINT_ENERGY_COLUMNS = ["energy_per_sample_j", "energy_per_token_j", "power_per_device_w",
                        "energy_too_short", "energy_reason"]
MEASURE = method.PHASES.index("measure")   # a timed step's phase code in the step columns


def repeat_figures(ranks: dict, cols: dict):
    """({throughput, samples, window_s, straggler, straggler_host, drift, the window's energy:
    RUN_ENERGY_COLUMNS, and where recorded host_lag, step_syncs}, the durations of every rank's
    timed steps) of an ok training repeat, from each rank's record (`ranks`: rank -> the record
    without its steps) and step columns (`cols`: rank -> numpy columns).
    Raises KeyError/TypeError/ValueError where the records cannot give a throughput."""
    timings, first, second = [], 0.0, 0.0
    order = sorted(ranks)
    hosts = [ranks[r]["host"] for r in order]
    measure = {r: cols[r]["phase"] == MEASURE for r in order}
    edges = np.cumsum([0] + [int(np.count_nonzero(measure[r])) for r in order])
    timed = np.empty(edges[-1], np.float64)   # every rank's timed durations, one array
    for r, a, b in zip(order, edges[:-1], edges[1:]):
        c, m = cols[r], measure[r]
        timings.append(method.rank_timing(c["samples"][m], ranks[r]["window"]))
        steps = timed[a:b]
        np.subtract(c["end"][m], c["start"][m], out=steps)
        h1, h2 = method.halves(steps)
        first, second = first + h1, second + h2
    windows = [w for _, w in timings]
    return ({"throughput": method.repeat_throughput(timings),
             "samples": sum(s for s, _ in timings), "window_s": max(windows),
             "straggler": method.straggler_ratio(windows),
             "straggler_host": method.straggler_host(windows, hosts),
             "drift": method.drift(first, second),
             **energy.repeat_energy((ranks[r].get("energy"), s) for r, (s, _) in zip(order, timings)),
             **host_bound.repeat_lag(ranks, cols, measure)},   # how far the device trails the host
            timed if order else None)


def summarize_point(row: dict, runs: list, durations=(), max_cv: float = method.MAX_CV,
                    max_drift: float = method.MAX_DRIFT, preflight: dict | None = None) -> dict:
    """A point's row: the method's figures over its ok repeats (analysis/figures/method.py), its
    status and first error, its device; `durations`: the timed steps' durations of each ok
    repeat (numpy arrays, reordered here), for the step-time percentiles; `preflight`: its preflight record
    (an `unhealthy` point ran no repeat, and says why)."""
    ok = [r for r in runs if r["status"] == "ok" and r["throughput"] is not None]
    # comm repeats have no training throughput: their figures are analysis/figures/comm.py's
    s = method.summarize(r["throughput"] for r in ok)
    row.update(throughput=s["median"], tp_min=s["min"], tp_max=s["max"], tp_cv=s["cv"],
               n_ok=sum(r["status"] == "ok" for r in runs), n_recorded=len(runs),
               ci_lo=s["ci_lo"], ci_hi=s["ci_hi"], ci_coverage=s["ci_coverage"])
    outcome = (preflight or {}).get("outcome")
    row["status"] = statuses.point_status((r["status"] for r in runs), row["repeats"], outcome)
    bad = next((r for r in runs if r["status"] != "ok" and r["error"]), None)
    row["error"] = bad["error"] if bad else (preflight or {}).get("error") if outcome == statuses.UNHEALTHY else None
    row["peak_device_bytes"] = max((r.get("peak_device_bytes") or 0 for r in runs),
                                   default=0) or None
    row["device"] = next((r["device"] for r in sorted(runs, key=lambda r: r["status"] != "ok")
                          if isinstance(r.get("device"), str)), None)
    # the repeats' durations are the reader's, used for nothing else: ordered in place
    q = method.percentiles(durations[0] if len(durations) == 1 else
                           np.concatenate(durations) if len(durations) else (), overwrite=True)
    row.update({f"step_p{k}": v for k, v in q.items()})
    row["straggler"] = method.median_of(r["straggler"] for r in ok)
    row["straggler_host"], row["straggler_host_repeats"] = method.most_named(
        r.get("straggler_host") for r in ok)
    row["drift"] = method.median_of(r["drift"] for r in ok)
    row.update(energy.point_energy(ok))   # joules per sample, power per device: their medians
    if row.get("bench", "train") == "train":   # a comm or checkpoint bench times no training step
        row.update(host_bound.point_verdict(row["device"], runs))   # host_lag, host_bound
    if s["n"]:  # flags belong to a figure: a point without one has its status instead
        flags = method.point_flags(s["cv"], s["n"], row["drift"], max_cv, max_drift)
    else:
        flags = None
    row.update(marks=flags, flag_spread=bool(flags and "C" in flags),
               flag_few_repeats=bool(flags and "N" in flags),
               flag_drift=bool(flags and "D" in flags))
    return row


def add_speedup(points: pd.DataFrame) -> pd.DataFrame:
    """Speedup over the 1-device point of the same configuration, and efficiency; a
    speedup over a flagged baseline is flagged (flag_baseline, speedup_marks).

    The baseline comes from the same sweep; only a sweep without one borrows the median of
    the other sweeps' (a folder of sweeps taken on different days would otherwise divide
    one day's figure by another's)."""
    key = [c for c in CONFIG_COLUMNS if c not in ("nodes", "gpus_per_node", "devices")]
    key += ["checkpoint"] if "checkpoint" in points else []   # checkpoint.every: its own baseline
    same = [tuple(str(v) for v in row) for row in points[key].itertuples(index=False)]
    own = list(zip(points["sweep"].astype(str), same))
    flags = points["marks"] if "marks" in points else pd.Series([None] * len(points), dtype=object)
    base: dict = {}
    base_flagged: dict = {}
    for o, cfg, devices, tp, f in zip(own, same, points.devices, points.throughput, flags):
        if devices == 1 and not tables.missing(tp):
            for k in (o, cfg):
                base.setdefault(k, []).append(tp)
                base_flagged[k] = base_flagged.get(k, False) or bool(isinstance(f, str) and f)
    base = {k: method.summarize(v)["median"] for k, v in base.items()}
    config = [o if o in base else cfg for o, cfg in zip(own, same)]
    points = points.copy()
    points["speedup"] = [None if tables.missing(tp) else method.speedup(tp, base.get(cfg))
                         for cfg, tp in zip(config, points.throughput)]
    points["efficiency"] = [method.efficiency(s, d) for s, d in zip(points.speedup, points.devices)]
    points["flag_baseline"] = [bool(not tables.missing(s) and d != 1 and base_flagged.get(cfg))
                               for cfg, s, d in zip(config, points.speedup, points.devices)]
    points["speedup_marks"] = [None if tables.missing(s) else
                               method.speedup_flags(f if isinstance(f, str) else "", b)
                               for s, f, b in zip(points.speedup, flags, points.flag_baseline)]
    return points


def add_flops(points: pd.DataFrame, manifests: dict) -> pd.DataFrame:
    """Model FLOPs per sample, achieved TFLOP/s per device, the peak of the dtype the math
    ran in and MFU, for every point whose model has a count (analysis/figures/flops.py)."""
    rows = []
    for p in points.itertuples(index=False):
        point = manifests.get((str(p.sweep), p.point)) or {}
        model, config = point.get("model"), point.get("config")
        model = model if isinstance(model, dict) else {}
        config = config if isinstance(config, dict) else {}
        per_sample = flops.flops_per_sample(model) if p.bench == "train" else None
        if per_sample is None:
            rows.append((None, None, None, None, None, None))
            continue
        achieved = None if tables.missing(p.throughput) else flops.achieved_tflops_per_device(
            p.throughput, per_sample, p.devices)
        device = p.device if isinstance(p.device, str) else None
        peak = flops.peak(device, p.precision, p.amp_dtype, config.get("peak_tflops"))
        rows.append((per_sample, achieved, peak["tflops"], peak["dtype"], peak["source"],
                     flops.mfu(achieved, peak["tflops"])))
    points = points.copy()
    for i, column in enumerate(FLOP_COLUMNS):
        points[column] = pd.Series([r[i] for r in rows], index=points.index, dtype=object)
    return points


def add_energy_per_token(points: pd.DataFrame, manifests: dict) -> pd.DataFrame:
    """A language model's joules per token (its spec says; contract/energy.py `per_token`: per
    sample over seq_len), None for every other point."""
    per_token = []
    for p in points.itertuples(index=False):
        model = (manifests.get((str(p.sweep), p.point)) or {}).get("model")
        model = model if isinstance(model, dict) else {}
        spec = models.find(model.get("name"))
        lm = spec is not None and spec.language_model
        per_token.append(energy.per_token(getattr(p, "energy_per_sample_j", None), model.get("seq_len"))
                         if lm else None)
    return points.assign(energy_per_token_j=pd.Series(per_token, index=points.index, dtype=object))


def amp_ratios(points: pd.DataFrame):
    """AMP throughput over FP32 throughput (`ratio`) for each configuration of one model
    both ran, as a DataFrame (the report's table and its plot), or None."""
    key = ["framework", "batch_size", "compile", "mode", "nodes", "gpus_per_node", "devices"]
    points = points.assign(mode=[tables.mode_of(r) for r in points.itertuples()])
    # (one figure per configuration: points of several sweeps may share one)
    fp32 = points[points.precision == "fp32"].groupby(key, sort=False).throughput.first()
    amp = points[points.precision == "amp"].groupby(key, sort=False).throughput.first()
    both = fp32.index.intersection(amp.index)
    if both.empty:
        return None
    return pd.DataFrame([{**dict(zip(key, k)), "precision": "amp/fp32", "status": "ok",
                          "ratio": amp[k] / fp32[k] if fp32[k] and amp[k] == amp[k] else None}
                         for k in both])
