"""Each stage's rows of the GPU check's table: its status, its figure, what is set beside it and
the ratio. A training point's figure is its throughput (tokens/s for a language model), beside
it the published figure for the device (analysis/published/, matched by the analysis's own rule,
analysis/published/sources.py: the same device, model, precision and devices, at another
batch where none is at ours, marked) and ours / published, its note the window's energy per
sample (per token) and mean power per GPU (`energy_note`); a bare loop's figure is its
samples/s over rounds alternated with the harness's, beside it the harness's over the same
rounds, and harness / bare with its spread (ratio.py); a
trace's (profile=true), its split into compute, communication not hidden and idle; the
health check's, the matrix multiply and NVML's verdicts; NCCL's, all_reduce's bus bandwidth at
its largest size (none of one rank, which moves nothing); the checkpoint's, the seconds
training was blocked and until durable.
"""
import glob
import json
import os
import statistics
from dataclasses import asdict, dataclass
from typing import Optional

from benchmarks.gpu_check.ratio import spread as ratio_spread
from contract import busbw, paths


@dataclass
class Row:
    stage: str
    status: str
    figure: str = ""
    beside: str = ""
    ratio: Optional[float] = None
    note: str = ""
    value: Optional[float] = None       # the figure as a number (table.json)
    spread: Optional[list] = None       # a bare loop's: the rounds' ratios' [min, max] (ratio.py)
    within_noise: Optional[bool] = None  # whether that spread includes 1.0

    def cells(self) -> list:
        ratio = "" if self.ratio is None else f"{self.ratio:.2f}"
        if self.spread:
            ratio += f" ({self.spread[0]:.2f}-{self.spread[1]:.2f})"
        return [self.stage, self.status, self.figure, self.beside, ratio, self.note]

    def as_dict(self) -> dict:
        return asdict(self)


HEADERS = ["stage", "status", "figure", "beside it", "ratio", "note"]


def noise_line(table) -> str:
    """Under the table: which harness / bare ratios are within noise (their rounds' spread
    includes 1.0) and which are not; "" without a bare loop's ratio."""
    rows = [r for r in table if r.within_noise is not None]
    if not rows:
        return ""
    within = [r.stage for r in rows if r.within_noise]
    outside = [f"{r.stage} {r.ratio:.2f} ({r.spread[0]:.2f}-{r.spread[1]:.2f})" for r in rows if not r.within_noise]
    return ("harness / bare, rounds alternated: "
            + (f"within noise (the spread includes 1.0): {', '.join(within)}" if within else "none within noise")
            + (f"; outside the noise: {', '.join(outside)}" if outside else ""))


def rows(stage, ran, ctx, done: dict) -> list:
    """The table's rows of one stage (`done`: the rows so far, by stage, for a bare loop's
    harness figure)."""
    if ran.why and ran.rc is None:
        return [Row(stage.name, "skipped", note=ran.why.removeprefix("skipped: "))]
    try:
        out = READERS[stage.kind](stage, ran, ctx, done)
    except Exception as exc:  # noqa: BLE001 (a stage whose files cannot be read says why)
        out = [Row(stage.name, "failed", note=f"its results cannot be read: {type(exc).__name__}: {exc}")]
    if ran.why:          # stopped past its limit: whatever it left, and why
        for row in out:
            row.note = "; ".join(x for x in (ran.why, row.note) if x)
            row.status = "timeout" if row.status in ("ok", "failed", "") else row.status
    if not out:
        out = [Row(stage.name, "failed", note=f"rc {ran.rc}, no result; {last_line(ran.log)}")]
    return out


def last_line(log) -> str:
    try:
        with open(log) as f:
            lines = [x.strip() for x in f if x.strip()]
        return lines[-1][:200] if lines else "its log is empty"
    except (OSError, TypeError):
        return "no log"


# ---- training points ----------------------------------------------------------------------
def _sweep(stage, ran, ctx, done) -> list:
    import analysis
    from analysis import tables
    from analysis.figures.metrics import metrics
    from analysis.published import layouts, sources
    from analysis.sections.llama import point_layout
    from analysis.sections.moe import expert_figures
    from contract import models
    folder = os.path.join(ctx.out, stage.name)
    if not glob.glob(os.path.join(folder, paths.POINTS_DIR, "*")):
        return []
    results = analysis.load(folder)
    figures = metrics(results).set_index("point")
    published, published_layouts = sources.rows(), layouts.rows()
    out = []
    for p in results.points.itertuples(index=False):
        m = figures.loc[p.point]
        lm = m.tokens_per_s is not None and m.tokens_per_s == m.tokens_per_s
        value = float(m.tokens_per_s) if lm else p.throughput
        unit = "tokens/s" if lm else "samples/s"
        row = Row(_label(stage.name, p), str(p.status), value=_number(value))
        if row.value is not None:
            row.figure = f"{row.value:,.1f} {unit}"
        notes = [f"{p.device}"] if isinstance(p.device, str) else []
        if _number(m.mfu) is not None:
            notes.append(f"MFU {tables.percent(m.mfu)}")
        if _number(m.peak_memory_bytes) is not None:
            notes.append(f"peak {m.peak_memory_bytes / 2**30:.2f} GiB ({m.memory_kind})")
        spec = models.find(p.model)
        if spec and spec.experts:   # the report's expert load (analysis/sections/moe.py)
            load = expert_figures(results, p.sweep, p.point)["load"]
            if load is not None:
                notes.append(f"expert load {load:.2f} (max/mean)")
        notes.append(energy_note(m))
        if isinstance(getattr(p, "host_bound", None), str) and p.host_bound != "cpu":   # docs/anatomy.md
            lag = _number(p.host_lag)
            notes.append(p.host_bound + ("" if lag is None else f" (device {lag:.2f} steps behind the host)"))
        if isinstance(p.error, str) and p.error:
            notes.append(p.error[:300])
        if lm:   # published layouts: tokens/s per GPU of the same layout and shape on the device
            found = [r for r in layouts.find(point_layout(results.manifest(p.sweep, p.point), p.device),
                                             published_layouts) if r.get("tokens_per_s_per_gpu")]
            if found and row.value is not None:
                pub = found[0]
                row.beside = f"{pub['tokens_per_s_per_gpu']:,.0f} tokens/s per GPU, {pub['file']} {pub['case']}"
                row.ratio = row.value / p.devices / pub["tokens_per_s_per_gpu"]
        else:
            matched = sources.beside(results.points[results.points.point == p.point], published)
            if matched:
                _, pub, ratio = matched[0]
                row.beside = (f"{pub['throughput']:,.0f} samples/s, {pub['file']} bs {pub.get('batch_size')}"
                              + (" (not our batch)" if pub.get("other_batch") else ""))
                row.ratio = ratio
        if not row.beside and row.value is not None:
            row.beside = f"none published for {p.device}" + (" at this layout and shape" if lm else "")
        row.note = "; ".join(notes)
        out.append(row)
    return out + _traces(stage, results, ctx)


def _traces(stage, results, ctx) -> list:
    """A row per trace profile=true left (`<stage> trace`): its split (analysis/figures/
    trace_split.py), compute's share its value; a CPU's trace has no GPU kernels: its size,
    gzip'd, in KiB instead. Its note says where the trace is (in the tarball)."""
    from analysis.figures import trace_split
    from analysis.read import trace_file
    out = []
    for t in trace_file.splits(results):
        name, where = f"{stage.name} trace", os.path.relpath(t["path"], ctx.out)
        if t["error"]:
            out.append(Row(name, "failed", note=t["error"][:300]))
        elif t["split"] is None:
            kib = os.path.getsize(t["path"]) / 1024
            out.append(Row(name, "ok", f"{kib:,.1f} KiB gzip'd", value=kib,
                           note=f"{trace_split.text(None)}; {where}"))
        else:
            out.append(Row(name, "ok", trace_split.text(t["split"]),
                           value=trace_split.shares(t["split"])["compute"],
                           note=f"value: compute's share; {where}"))
    return out


def energy_note(m) -> str:
    """A point's energy as the note says it (contract/energy.py): joules per sample (per token
    for a language model) and mean power per GPU, marked where the window was too short for
    NVML's counter; else why there is none."""
    from contract import energy
    per_token = _number(getattr(m, "energy_per_token_j", None))
    per = per_token if per_token is not None else _number(getattr(m, "energy_per_sample_j", None))
    if per is None:
        return f"energy n/a: {getattr(m, 'energy_reason', None) or 'not recorded'}"
    power = _number(getattr(m, "power_per_device_w", None))
    text = f"{per:.3g} J/{'token' if per_token is not None else 'sample'}" + (
        f", {power:.0f} W per GPU" if power is not None else "")
    if _number(getattr(m, "energy_too_short", None)):   # True (a bool is a number here)
        text += f" (window under {energy.MIN_WINDOW_S:g} s: too short for NVML's counter)"
    return text


def _label(stage: str, p) -> str:
    """A point's row name: the stage, and what its points differ in (dtype, model)."""
    if stage == "rn50":
        return f"{stage} {p.amp_dtype}"
    if stage == "moe":
        return f"{stage} {p.model}"
    return stage


def _number(v) -> Optional[float]:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if v == v else None


# ---- bare loops ----------------------------------------------------------------------------
def _bare(stage, ran, ctx, done) -> list:
    """A row per bare kind of a pair.py stage: the bare loop's median samples/s, beside it the
    harness's median over the same alternated rounds, and the ratio with its spread (ratio.py)."""
    with open(ran.log) as f:
        found = [json.loads(x[len("PAIR "):]) for x in f if x.startswith("PAIR ")]
    if not found:
        return [Row(name, "failed", note=last_line(ran.log)) for _, name in stage.bare]
    pair = found[-1]
    harness = [h for h in pair["harness"] if h]
    return [_bare_row(name, pair, pair["bare"][kind], harness) for kind, name in stage.bare]


def _bare_row(name: str, pair: dict, bare: dict, harness: list) -> Row:
    if bare["error"]:
        skipped = "No module named 'torchvision'" in bare["error"]
        return Row(name, "skipped" if skipped else "failed", note=f"bare loop ({bare['kind']}): {bare['error']}")
    if pair["harness_error"]:
        return Row(name, "failed", note=pair["harness_error"])
    rate = statistics.median(bare["samples_per_s"])
    row = Row(name, "ok", f"{rate:,.1f} samples/s", value=rate)
    found = ratio_spread(pair["harness"], bare["samples_per_s"])
    row.beside = f"{statistics.median(harness):,.1f} samples/s (harness, its rank, same rounds)"
    row.ratio, row.spread, row.within_noise = found.median, [found.low, found.high], found.within_noise
    same = {"dtype": (pair["harness_amp_dtype"], bare["amp_dtype"]),
            "threads": (pair["harness_threads"], bare["torch_threads"])}
    differ = [f"{k} {h} (harness) vs {b} (bare)" for k, (h, b) in same.items() if h is not None and h != b]
    if differ:   # not the same work or environment: no ratio to believe
        row.status = "failed"
    row.note = "; ".join(
        [f"bare loop ({bare['kind']}), {found.rounds} rounds alternated with the harness",
         found.verdict(), "per round " + ", ".join(f"{x:.2f}" for x in found.ratios)]
        + (["NOT the same: " + ", ".join(differ)] if differ else
           [f"both {bare['amp_dtype'] or 'fp32'}, {bare['torch_threads']} threads"]) + [bare["device"]])
    return row


# ---- health, NCCL, checkpoint --------------------------------------------------------------
def _health(stage, ran, ctx, done) -> list:
    found = sorted(glob.glob(os.path.join(ctx.out, "health", "health-*", "health.json")))
    if not found:
        return []
    verdict = json.load(open(found[-1]))
    checks = verdict["nodes"][0]["checks"] if verdict.get("nodes") else {}
    matmul = checks.get("matmul", {})
    statuses = ", ".join(f"{name} {c['status']}" for name, c in checks.items()
                         if c["status"] != "skipped" and name != "matmul")
    skipped = [name for name, c in checks.items() if c["status"] == "skipped"]
    note = statuses + (f"; skipped: {', '.join(skipped)} ({checks[skipped[0]]['reason']})" if skipped else "")
    return [Row(stage.name, "ok" if verdict.get("ok") else "sick", matmul.get("reason") or "",
                value=_number(matmul.get("value")), note=note)]


def _rank0(ctx, name: str):
    found = sorted(glob.glob(os.path.join(ctx.out, name, paths.POINTS_DIR, "*", paths.repeat_name(0),
                                   paths.rank_record_name(0))))
    return json.load(open(found[0])) if found else None


def _comm(stage, ran, ctx, done) -> list:
    rec = _rank0(ctx, stage.name)
    if rec is None:
        return []
    rows = [r for r in rec.get("comm") or [] if r["op"] == "all_reduce"]
    if rec["status"] != "ok" or not rows:
        return [Row(stage.name, rec["status"], note=str(rec.get("error"))[:300])]
    top = rows[-1]
    note = (f"{rec['world_size']} rank(s), {rec['environment'].get('backend')}, "
            f"{sum(1 for r in rows if r['wrong'])} with wrong elements")
    if not busbw.moves(rec["world_size"]):   # a record of one rank: no bandwidth to show
        return [Row(stage.name, "skipped", note=f"{note}; one rank moves nothing: no bandwidth")]
    value = top["busbw_gbps"]
    return [Row(stage.name, "ok", f"{value:.1f} GB/s busbw at {top['bytes'] / 2**20:.0f} MiB",
                value=value, note=note)]


def _checkpoint(stage, ran, ctx, done) -> list:
    rec = _rank0(ctx, stage.name)
    if rec is None:
        return []
    ck = rec.get("checkpoint") or {}
    if rec["status"] != "ok" or "blocked_s" not in ck:
        return [Row(stage.name, rec["status"], note=str(rec.get("error"))[:300])]
    return [Row(stage.name, "ok", f"blocked {ck['blocked_s']:.2f} s, durable {ck['durable_s']:.2f} s",
                value=ck["blocked_s"], note=f"{ck['mode']}, {ck['bytes'] / 2**20:.1f} MiB a rank, loaded "
                                            f"in {ck['load_s']:.2f} s, equal: {ck['equal']}")]


READERS = {"sweep": _sweep, "bare": _bare, "health": _health, "comm": _comm, "checkpoint": _checkpoint}
