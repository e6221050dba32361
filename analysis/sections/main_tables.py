"""Per model, the report's main tables and its detail tables (the terminal's; report.html
has one table per model, analysis/report/page.py). DLPerf's grids: rows = framework /
precision / batch size / mode, columns = nodes x devices per node, cells = one of the
method's figures (analysis/figures/method.py) with its flags, model FLOPs and MFU
(analysis/figures/flops.py). Points that failed or have not run are shown as such, never
dropped.
"""
import pandas as pd

from analysis import tables
from analysis.figures import method
from analysis.figures.points import amp_ratios
from analysis.tables import table
from contract import energy

GRIDS = (("Throughput (samples/s, median of ok repeats)", "throughput", ".1f", None),
            ("Speedup over 1 device", "speedup", ".2f", "speedup_marks"),
            ("Scaling efficiency (speedup / devices)", "efficiency", ".0%", "speedup_marks"))


def _ms(seconds) -> str:
    ms = seconds * 1e3
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.1f}" if ms >= 10 else f"{ms:.2f}"


def _steps(row) -> str:
    if tables.missing(row.step_p50):
        return "n/a"
    return " / ".join(_ms(getattr(row, f"step_p{percentile}")) for percentile in method.PERCENTILES)


def limits_of(results) -> dict:
    """The flags' thresholds the results were loaded with (analysis.load's max_cv, max_drift)."""
    return {"max_cv": method.MAX_CV, "max_drift": method.MAX_DRIFT,
            **(getattr(results, "limits", None) or {})}


def confidence_section(pts: pd.DataFrame, limits: dict) -> list:
    """The median's interval and the flags of one model's points, with the marks' legend."""
    if "ci_lo" not in pts:   # points not made by analysis.load
        return []
    marks = "".join(sorted({mark for col in ("marks", "speedup_marks") if col in pts
                            for point_marks in pts[col] if isinstance(point_marks, str)
                            for mark in point_marks},
                           key=list(method.MARKS).index))
    parts = [f"### Median's 95% confidence interval (samples/s) and flags\n"
             f"{table(pts, 'throughput', tables.interval, 'marks')}\n"
             "lo..hi: order statistics of the ok repeats (binomial, distribution-free; from 6 "
             "repeats); (lo..hi): min..max of fewer repeats, no 95% interval exists"
             + (f"\nMarks: {method.legend(marks=marks, **limits)}" if marks else "\nMarks: none")]
    return parts


def _straggler(row) -> str:
    """The ratio, and the slowest rank's node where repeats named one: 1.24 (node2, 3/3)."""
    text = f"{row.straggler:.2f}"
    host = getattr(row, "straggler_host", None)
    if isinstance(host, str):
        text += f" ({host}, {int(row.straggler_host_repeats)}/{int(row.n_ok)})"
    return text


def window_sections(pts: pd.DataFrame) -> list:
    """Inside the timed window: per rank step-time percentiles and the straggler ratio."""
    parts = []
    if "step_p50" in pts and pts.step_p50.notna().any():
        parts.append("### Step time per rank (ms: p50 / p90 / p99 of the timed steps, every "
                     f"rank of the ok repeats)\n{table(pts, 'step_p50', _steps)}")
        parts.append("### Straggler ratio (slowest rank's timed window / median rank's, median "
                     f"over ok repeats)\n{table(pts, 'straggler', _straggler)}\n"
                     "(node, k/n): the slowest rank's node, named where its window is more than "
                     f"{method.STRAGGLER_LIMIT:.0%} longer than the median rank's, in k of the "
                     "n ok repeats")
    return parts


def _giga(flops) -> str:
    return f"{flops / 1e9:.3g} GFLOP" if flops >= 1e8 else f"{flops / 1e6:.3g} MFLOP"


def flops_sections(pts: pd.DataFrame) -> list:
    """Achieved TFLOP/s per device and MFU of one model's points, where FLOPs are counted."""
    if "flops_per_sample" not in pts or not pts.flops_per_sample.notna().any():
        return []
    counts = sorted({(str(size), int(flops)) for size, flops in zip(pts.model_size, pts.flops_per_sample)
                     if flops is not None and flops == flops})   # not None, not NaN
    per = ", ".join(f"{size} {_giga(flops)}" for size, flops in counts)
    parts = [f"### Achieved TFLOP/s per device (model FLOPs per sample: {per}; a multiply-add "
             f"= 2 FLOPs, training = 3 x forward; docs/flops.md)\n"
             f"{table(pts, 'tflops_per_device', '.3g')}"]
    known = pts[pts.peak_tflops.notna()]
    if len(known):
        used = sorted({f"{device} {dtype}: {peak:g}"
                       for device, dtype, peak in zip(known.device.fillna("peak_tflops="),
                                                      known.math_dtype, known.peak_tflops)})
        parts.append("### MFU (model FLOPs utilisation: achieved / the device's dense peak)\n"
                     f"{table(pts, 'mfu', lambda row: tables.percent(row.mfu))}\n"
                     "MFU is taken against the dtype the math ran in: fp32 runs on Ampere or newer "
                     "count against the TF32 peak (TF32 is on there: the frameworks' default, set "
                     "by PyTorch's session); AMP against its bf16 or fp16 peak. Peaks "
                     f"(analysis/peaks.yaml, with each figure's datasheet): {'; '.join(used)}")
    else:
        where = sorted({str(device) for device in pts.device.dropna()}) or ["unknown"]
        parts.append(f"MFU: n/a: no peak known for {', '.join(where)} (analysis/peaks.yaml); "
                     "set peak_tflops=")
    return parts


def energy_sections(pts: pd.DataFrame) -> list:
    """Joules per sample (per token for a language model) and mean power per device of one
    model's points (contract/energy.py), or the one line that says why there are none."""
    if "energy_per_sample_j" not in pts:   # points not made by analysis.load
        return []
    if not pts.energy_per_sample_j.notna().any():
        # records older than the field say nothing: they never measured it
        why = list(dict.fromkeys(reason for reason in pts.energy_reason
                                 if isinstance(reason, str) and reason != energy.NO_RECORD))
        return [f"Energy per sample: n/a: {'; '.join(why)}"] if why else []
    lm = "energy_per_token_j" in pts and pts.energy_per_token_j.notna().any()
    marks: list = ["S" if not tables.missing(short) and short else None for short in pts.energy_too_short]
    pts = pts.assign(energy_marks=marks)
    column, unit = ("energy_per_token_j", "token") if lm else ("energy_per_sample_j", "sample")
    parts = [f"### Energy per {unit} (J: every device's energy in the timed window, NVML's "
             f"counter, over the window's {unit}s; median of ok repeats)\n"
             f"{table(pts, column, '.3g', 'energy_marks')}",
             "### Mean power per device (W: each device's energy / its timed window, their mean)\n"
             + table(pts, "power_per_device_w", ".0f", "energy_marks")]
    note = []
    if pts.energy_marks.notna().any():
        note.append(f"S = a timed window shorter than {energy.MIN_WINDOW_S:g} s ("
                    f"{energy.MIN_UPDATES} updates of NVML's counter, about every "
                    f"{energy.UPDATE_PERIOD_S:g} s): each edge may read it one update late, "
                    f"so the figure may be off by 2 x {energy.UPDATE_PERIOD_S:g} s / window "
                    f"({2 / energy.MIN_UPDATES:.0%} at {energy.MIN_WINDOW_S:g} s); time more "
                    "steps (docs/method.md, \"Energy\")")
    missing = pts[pts.energy_per_sample_j.isna() & pts.energy_reason.notna()]
    if len(missing):
        note.append("n/a: " + "; ".join(dict.fromkeys(missing.energy_reason)))
    return parts + (["\n".join(note)] if note else [])


def amp_ratio(points: pd.DataFrame):
    """The AMP over FP32 table of one model's points, or None."""
    ratios = amp_ratios(points)
    return None if ratios is None else table(ratios, "ratio", ".2f")


def main_tables(model: str, pts: pd.DataFrame, limits: dict) -> str:
    """A model's grids of the main figures (the terminal's; report.html has one table)."""
    sizes = ", ".join(sorted(pts.model_size.dropna().unique()))
    parts = [f"## {model} ({sizes})"]
    for title, column, fmt, marks in GRIDS:
        parts.append(f"### {title}\n{table(pts, column, fmt, marks)}")
        if column == "throughput":
            parts += confidence_section(pts, limits)
    parts += flops_sections(pts)
    parts += energy_sections(pts)
    if pts.peak_device_bytes.notna().any():
        parts.append("### Peak device memory per rank (GiB)\n"
                     + table(pts.assign(mem=tables.gib(pts.peak_device_bytes)), "mem", ".2f"))
    if (pts.status == "partial").any():
        parts.append("`*` some repeats of this point did not finish ok; see the failures.")
    return "\n\n".join(parts)


def detail_tables(model: str, pts: pd.DataFrame) -> str:
    """A model's detail grids: spread, step times per rank, straggler, AMP over FP32."""
    parts = [f"## {model}: details (spread, step times, straggler, AMP over FP32)",
             "### Spread across repeats (coefficient of variation)\n" + table(pts, "tp_cv", ".1%")]
    parts += window_sections(pts)
    ratio = amp_ratio(pts)
    if ratio is not None:
        parts.append("### AMP over FP32 (throughput ratio)\n" + ratio)
    return "\n\n".join(parts)
