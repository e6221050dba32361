"""DLPerf-style tables: per model, rows = framework / precision / batch size (/ compile),
columns = nodes x devices per node, cells = the method's figures (analysis/method.py)
with their flags, model FLOPs and MFU (analysis/flops.py). Points that failed or have
not run are shown as such, never dropped. Published figures that match a point are set
beside it (analysis/published.py)."""
import pandas as pd

from analysis import environment, health, method, published, special, tables, traces
from analysis import input as input_section  # data=files and bench=input (docs/data.md)
from analysis.tables import LABELS, ROW_KEY, table  # noqa: F401 (report.LABELS, report.table)
from frameworks.common import layout

SECTIONS = (("Throughput (samples/s, median of ok repeats)", "throughput", ".1f", None),
            ("Speedup over 1 device", "speedup", ".2f", "speedup_marks"),
            ("Scaling efficiency (speedup / devices)", "efficiency", ".0%", "speedup_marks"),
            ("Spread across repeats (coefficient of variation)", "tp_cv", ".1%", None))


def _ms(seconds) -> str:
    ms = seconds * 1e3
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.1f}" if ms >= 10 else f"{ms:.2f}"


def _interval(row) -> str:
    """The median's 95% interval, lo..hi; (min..max) where fewer repeats give none."""
    if row.ci_lo is not None and row.ci_lo == row.ci_lo:
        return f"{row.ci_lo:.1f}..{row.ci_hi:.1f}"
    return f"({row.tp_min:.1f}..{row.tp_max:.1f})"


def _steps(row) -> str:
    if row.step_p50 is None or row.step_p50 != row.step_p50:
        return "n/a"
    return " / ".join(_ms(getattr(row, f"step_p{q}")) for q in method.PERCENTILES)


def limits_of(results) -> dict:
    """The flags' thresholds the results were loaded with (analysis.load's max_cv, max_drift)."""
    return {"max_cv": method.MAX_CV, "max_drift": method.MAX_DRIFT,
            **(getattr(results, "limits", None) or {})}


def confidence_section(pts: pd.DataFrame, limits: dict) -> list:
    """The median's interval and the flags of one model's points, with the marks' legend."""
    if "ci_lo" not in pts:   # points not made by analysis.load
        return []
    marks = "".join(sorted({m for col in ("marks", "speedup_marks") if col in pts
                            for f in pts[col] if isinstance(f, str) for m in f},
                           key=list(method.MARKS).index))
    parts = [f"### Median's 95% confidence interval (samples/s) and flags\n"
             f"{table(pts, 'throughput', _interval, 'marks')}\n"
             "lo..hi: order statistics of the ok repeats (binomial, distribution-free; from 6 "
             "repeats); (lo..hi): min..max of fewer repeats, no 95% interval exists"
             + (f"\nMarks: {method.legend(marks=marks, **limits)}" if marks else "\nMarks: none")]
    return parts


def window_sections(pts: pd.DataFrame) -> list:
    """Inside the timed window: per rank step-time percentiles and the straggler ratio."""
    parts = []
    if "step_p50" in pts and pts.step_p50.notna().any():
        parts.append("### Step time per rank (ms: p50 / p90 / p99 of the timed steps, every "
                     f"rank of the ok repeats)\n{table(pts, 'step_p50', _steps)}")
        parts.append("### Straggler ratio (slowest rank's timed window / median rank's, median "
                     f"over ok repeats)\n{table(pts, 'straggler', '.2f')}")
    return parts


def _giga(n) -> str:
    return f"{n / 1e9:.3g} GFLOP" if n >= 1e8 else f"{n / 1e6:.3g} MFLOP"


def flops_sections(pts: pd.DataFrame) -> list:
    """Achieved TFLOP/s per device and MFU of one model's points, where FLOPs are counted."""
    if "flops_per_sample" not in pts or not pts.flops_per_sample.notna().any():
        return []
    counts = sorted({(str(s), int(f)) for s, f in zip(pts.model_size, pts.flops_per_sample)
                     if f is not None and f == f})
    per = ", ".join(f"{s} {_giga(f)}" for s, f in counts)
    parts = [f"### Achieved TFLOP/s per device (model FLOPs per sample: {per}; a multiply-add "
             f"= 2 FLOPs, training = 3 x forward; docs/flops.md)\n"
             f"{table(pts, 'tflops_per_device', '.3g')}"]
    known = pts[pts.peak_tflops.notna()]
    if len(known):
        used = sorted({f"{d} {t}: {v:g}" for d, t, v in zip(known.device.fillna("peak_tflops="),
                                                            known.math_dtype, known.peak_tflops)})
        parts.append("### MFU (model FLOPs utilisation: achieved / the device's dense peak)\n"
                     f"{table(pts, 'mfu', '.1%')}\n"
                     "MFU is taken against the dtype the math ran in: fp32 runs on Ampere or newer "
                     "count against the TF32 peak (TF32 is on there: the frameworks' default, set "
                     "by PyTorch's session); AMP against its bf16 or fp16 peak. Peaks "
                     f"(analysis/peaks.yaml, with each figure's datasheet): {'; '.join(used)}")
    else:
        where = sorted({str(d) for d in pts.device.dropna()}) or ["unknown"]
        parts.append(f"MFU: n/a: no peak known for {', '.join(where)} (analysis/peaks.yaml); "
                     "set peak_tflops=")
    return parts


def amp_ratios(points: pd.DataFrame):
    """AMP throughput over FP32 throughput (`ratio`) for each configuration of one model
    both ran, as a DataFrame (the table below and analysis/plot.py), or None."""
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


def amp_ratio(points: pd.DataFrame):
    """The AMP over FP32 table of one model's points, or None."""
    ratios = amp_ratios(points)
    return None if ratios is None else table(ratios, "ratio", ".2f")


def header(results) -> str:
    runs = results.runs
    lines = [f"# Results: {results.root}"]
    if "framework_version" in runs:
        versions = (runs.dropna(subset=["framework_version"])
                    .merge(results.points[["point", "framework"]], on="point")
                    .groupby("framework")["framework_version"].first())
        lines.append("frameworks: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    if "device" in runs:
        lines.append("devices: " + ", ".join(sorted(runs["device"].dropna().astype(str).unique())))
    p = results.points
    lines.append(f"points: {len(p)} ({(p.status == 'ok').sum()} ok, "
                 f"{(p.status == 'partial').sum()} partial, "
                 f"{(~p.status.isin(['ok', 'partial'])).sum()} without a result)")
    lines.append("\n" + environment.environment_block(results))
    return "\n".join(lines)


def failures(results) -> str:
    bad = results.runs[results.runs.status != "ok"] if len(results.runs) else results.runs
    lines = []
    for r in bad.itertuples():
        lines.append(f"- {r.point} repeat {r.repeat}: {r.status}: {r.error}")
        tail = getattr(r, "log_tail", None)
        if isinstance(tail, dict) and tail.get("lines"):  # the rank's last words, as it left them
            lines.append(f"  rank {tail['rank']}'s log, last {len(tail['lines'])} lines:")
            lines += [f"    {line}" for line in tail["lines"]]
    missing = results.points[results.points.status == "missing"]
    lines += [f"- {r.point}: no repeat recorded" for r in missing.itertuples()]
    corrupt = getattr(results, "corrupt", [])
    if corrupt:  # every one, also those a repeat's error above names
        lines.append(f"Corrupt files ({len(corrupt)}): each costs only its repeat "
                     f"(a {layout.POINT_FILE} its point, a search ledger its search)")
        lines += [f"- {c['file']}: {c['reason']}" for c in corrupt]
    return "\n".join(["## Failed, cut short or missing", *lines]) if lines else ""


def render(results) -> str:
    train = results.points[(results.points.bench == "train")
                           & ~results.points.model.isin(special.OWN_SECTIONS)]  # theirs: below
    train = input_section.on_synthetic(results, train)  # training from files: its own section
    limits = limits_of(results)
    parts = [header(results)]
    for model, pts in train.groupby("model", sort=True):
        sizes = ", ".join(sorted(pts.model_size.dropna().unique()))
        parts.append(f"## {model} ({sizes})")
        for title, column, fmt, marks in SECTIONS:
            parts.append(f"### {title}\n{table(pts, column, fmt, marks)}")
            if column == "throughput":
                parts += confidence_section(pts, limits)
        parts += window_sections(pts)
        parts += flops_sections(pts)
        ratio = amp_ratio(pts)
        if ratio is not None:
            parts.append("### AMP over FP32 (throughput ratio)\n" + ratio)
        if pts.peak_device_bytes.notna().any():
            parts.append("### Peak device memory per rank (GiB)\n"
                         + table(pts.assign(mem=pts.peak_device_bytes / 2**30), "mem", ".2f"))
    parts.append(special.render_special(results))
    parts.append(input_section.section(results))
    parts.append(published.section(results))
    parts.append(traces.section(results))       # profile=true's traces, linked
    parts.append(health.section(results))       # preflight=true: the nodes left out, and why
    if (train.status == "partial").any():
        parts.append("`*` some repeats of this point did not finish ok; see below.")
    parts.append(failures(results))
    return "\n\n".join(p for p in parts if p) + "\n"
