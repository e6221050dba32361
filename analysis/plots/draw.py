"""The report's plots, from what analysis.load read (this module reads no file):

- throughput_<model>.png   per framework, precision and allocation, whiskers: the median's 95%
                           interval where 6+ repeats give one, else min..max of the repeats
- scaling_<model>.png      speedup against devices, log2 axes with the device counts as ticks,
                           the ideal line, one line per framework and precision; whiskers:
                           min..max of the repeats over the 1-device median
- rank_steps_<model>.png   step times of each rank of one point (the most ranks; of those the
                           worst straggler ratio): a box per rank, so a straggler shows
- amp_<model>.png          AMP throughput over FP32, per framework and allocation
- busbw.png                bus bandwidth against message size, log-log, a panel per node
                           count, a line per collective and ranks per node (bench=comm)
- checkpoint.png           checkpoint GB/s against nodes, with the bare write's line
                           (bench=checkpoint; analysis/plots/checkpoint.py)

`render` makes them all in memory from analysis/plots/data.py's PlotData (the points and
per-rank summaries, never the step records): the report writes the PNGs and embeds them in
its page. A plot without its data is skipped with one line that says what is missing.
The look of every plot (sizes, colours per framework, markers per precision) is
analysis/plots/style.py's.
"""
import math
import os
import warnings

import pandas as pd
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from analysis import tables
from analysis.figures.points import amp_ratios
from analysis.plots import style
from analysis.plots.checkpoint import checkpoint_plots
from analysis.plots.data import MAX_BOXES, Plot
from analysis.plots.data import numeric as _num
from contract import busbw


def _series(pts: pd.DataFrame):
    """(label, framework, precision, shade, rows) per line or bar series of one model: a
    framework and precision, split by batch size and mode only where those vary, and by
    sweep where a folder of sweeps ran the same configuration more than once."""
    many_bs = pts.batch_size.nunique() > 1
    many_modes = pts.groupby("framework")["mode"].nunique().max() > 1
    shades: dict = {}
    for (fw, prec, bs, mode), rows in pts.groupby(["framework", "precision", "batch_size", "mode"]):
        label = " ".join([str(fw), str(prec)] + ([f"bs{bs}"] if many_bs else [])
                         + ([str(mode)] if many_modes else []))
        parts = (rows.groupby("sweep", sort=True) if rows.allocation.duplicated().any()
                 else [(None, rows)])
        for sweep, part in parts:
            shade = shades[(fw, prec)] = shades.get((fw, prec), -1) + 1
            named = f"{label} ({os.path.basename(str(sweep))})" if sweep is not None else label
            yield named, fw, prec, shade, part.drop_duplicates("allocation")  # one row an allocation


# ---- throughput ------------------------------------------------------------------------------
def _interval(rows):
    """(lo, hi) of each point's whisker: the median's 95% interval where there is one
    (6+ repeats, analysis/figures/method.py), else min..max of its repeats."""
    lo, hi = _num(rows.tp_min), _num(rows.tp_max)
    if "ci_lo" in rows:
        lo, hi = _num(rows.ci_lo).fillna(lo), _num(rows.ci_hi).fillna(hi)
    return lo, hi


def throughput_plots(data):
    train = data.points
    if not len(train) or not _num(train.throughput).notna().any():
        return "no training point has a throughput"
    for model, pts in train.groupby("model"):
        if not _num(pts.throughput).notna().any():
            continue
        columns = tables.allocation_columns(pts)
        series = list(_series(pts))
        width = 0.8 / len(series)
        fig, ax = style.new_plot()
        for i, (label, fw, prec, shade, rows) in enumerate(series):
            x = [columns.index(a) - 0.4 + width * (i + 0.5) for a in rows.allocation]
            tp, (lo, hi) = _num(rows.throughput), _interval(rows)
            has = tp.notna().to_numpy()
            xs = [v for v, h in zip(x, has) if h]
            ax.bar(xs, tp[has], width,
                   yerr=[(tp - lo)[has].clip(lower=0), (hi - tp)[has].clip(lower=0)],
                   color=style.framework_colour(fw, shade), hatch=style.hatch(prec),
                   edgecolor="white", linewidth=0.5, label=label, error_kw=style.WHISKER)
            for v, h, status in zip(x, has, rows.status):   # a point without a figure says why
                if not h:
                    ax.text(v, 0, f" {tables.label(status)}", rotation=90, ha="center", va="bottom",
                            fontsize=7, color=style.OTHER_COLOUR)
        ax.set_xticks(range(len(columns)), columns)
        ax.set_ylim(top=ax.get_ylim()[1] * 1.15)   # headroom for the legend
        ax.set(xlabel="nodes x devices per node", ylabel="samples/s (median of repeats)",
               title=f"{model}: throughput\n(whiskers: the median's 95% interval, or min..max "
                     "under 6 repeats)")
        ax.grid(axis="x", visible=False)
        ax.legend(ncols=2)
        yield f"throughput_{model}.png", fig


# ---- scaling ---------------------------------------------------------------------------------
def device_ticks(devices) -> list:
    """The x ticks of a device axis: the counts present and the powers of two up to the
    largest (1, 2, 4, 8, 16, 32 for a DLPerf sweep; 1, 2, 3 for 1 and 3)."""
    present = sorted({int(d) for d in devices})
    top = present[-1]
    return sorted(set(present) | {2 ** k for k in range(int(math.log2(top)) + 1)})


def scaling_plots(data):
    train = data.points
    have = train[_num(train.speedup).notna()] if len(train) else train
    models = ([m for m, pts in have.groupby("model") if pts.devices.nunique() > 1]
              if len(have) else [])
    if not models:
        return ("no configuration has a speedup beyond 1 device (needs its 1-device point and "
                "a larger one, with throughputs)")
    for model in models:
        pts = have[have.model == model]
        top = int(pts.devices.max())
        fig, ax = style.new_plot()
        ax.plot([1, top], [1, top], **style.IDEAL)
        for label, fw, prec, shade, rows in _series(pts):
            rows = rows.sort_values(["devices", "nodes"])
            s = _num(rows.speedup)
            base = _num(rows.throughput) / s          # the 1-device median this speedup is over
            lo, hi = _num(rows.tp_min) / base, _num(rows.tp_max) / base
            last = rows.iloc[-1]
            ax.errorbar(rows.devices, s, yerr=[(s - lo).clip(lower=0), (hi - s).clip(lower=0)],
                        color=style.framework_colour(fw, shade), marker=style.marker(prec),
                        linestyle=style.line(prec), ms=5,
                        label=f"{label} ({float(last.efficiency):.0%} at {int(last.devices)})",
                        **style.WHISKER)
        ticks = device_ticks(pts.devices)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlim(ticks[0] / 1.25, ticks[-1] * 1.25)
        ax.set(xlabel="devices", ylabel="speedup over 1 device",
               title=f"{model}: scaling\n(in the legend: efficiency at the largest count; "
                     "whiskers: min..max of the repeats)")
        ax.legend()
        yield f"scaling_{model}.png", fig


# ---- step times per rank ---------------------------------------------------------------------
def _rank_spread(ax, stats: pd.DataFrame, colour) -> None:
    """Each rank's timed step durations (ms) at x = 1, 2, ...: a box per rank, or beyond
    MAX_BOXES ranks its p10..p90 as a bar, its median as a dot and its slowest step as a x
    (analysis/plots/data.py's per-rank summary: the steps themselves never come here)."""
    if len(stats) <= MAX_BOXES:
        box = ax.bxp([{"med": r.med, "q1": r.q1, "q3": r.q3, "whislo": r.whislo,
                       "whishi": r.whishi, "fliers": r.fliers} for r in stats.itertuples()],
                     patch_artist=True, widths=0.6, flierprops={"markersize": 2, "alpha": 0.5},
                     medianprops={"color": "black"})
        for patch in box["boxes"]:
            patch.set_facecolor(colour)
        return
    x = range(1, len(stats) + 1)
    ax.vlines(x, stats.p10, stats.p90, color=colour, linewidth=2, label="p10..p90")
    ax.plot(x, stats.med, ".", color="black", ms=3, label="median")
    ax.plot(x, stats["max"], "x", color=style.OTHER_COLOUR, ms=3, label="slowest step")
    ax.legend()


def rank_step_plots(data):
    if not data.spreads:
        return "no timed steps recorded for an ok repeat"
    for spread in data.spreads:
        p, stats = spread.point, spread.ranks
        ranks, hosts = list(stats["rank"]), list(stats.host)
        fig, ax = style.new_plot()
        _rank_spread(ax, stats, style.framework_colour(p.framework, 1))
        if len(ranks) <= 16:
            ax.set_xticks(range(1, len(ranks) + 1), [f"{r}\n{h}" for r, h in zip(ranks, hosts)])
        else:  # many ranks: every k-th label
            k = math.ceil(len(ranks) / 16)
            ax.set_xticks(range(1, len(ranks) + 1, k), [str(r) for r in ranks[::k]])
        straggler = _num(pd.Series([p.straggler])).iloc[0]
        ax.set(xlabel="rank" + (" and host" if len(ranks) <= 16 else ""),
               ylabel="step time (ms, timed steps)",
               title=f"{spread.model}: step time per rank\n{p.point} ({spread.repeats} ok "
                     f"repeat(s); straggler ratio {'n/a' if pd.isna(straggler) else f'{straggler:.2f}'})")
        yield f"rank_steps_{spread.model}.png", fig


# ---- AMP over FP32 ---------------------------------------------------------------------------
def amp_plots(data):
    train = data.points
    found = [(m, amp_ratios(pts)) for m, pts in train.groupby("model")] if len(train) else []
    found = [(m, r) for m, r in found if r is not None and _num(r.ratio).notna().any()]
    if not found:
        return "no configuration ran both fp32 and amp with throughputs"
    for model, ratios in found:
        ratios = ratios[_num(ratios.ratio).notna()].assign(
            allocation=lambda r: [tables.allocation(n, g) for n, g in zip(r.nodes, r.gpus_per_node)])
        columns = tables.allocation_columns(ratios)
        many = ratios[["batch_size", "mode"]].drop_duplicates().shape[0] > 1
        series = list(ratios.groupby(["framework", "mode", "batch_size"]))
        width, shades = 0.8 / len(series), {}
        fig, ax = style.new_plot()
        for i, ((fw, mode, bs), rows) in enumerate(series):
            shade = shades[fw] = shades.get(fw, -1) + 1
            x = [columns.index(a) - 0.4 + width * (i + 0.5) for a in rows.allocation]
            bars = ax.bar(x, _num(rows.ratio), width, color=style.framework_colour(fw, shade),
                          label=fw + (f" {mode} bs{bs}" if many else ""))
            if len(series) * len(columns) <= 24:   # room for the figures on the bars
                ax.bar_label(bars, fmt="%.2f", fontsize=6.5)
        ax.axhline(1.0, **{**style.IDEAL, "label": "no gain (1.0)"})
        ax.set_ylim(0, max(1.0, _num(ratios.ratio).max()) * 1.3)   # headroom for the legend
        ax.set_xticks(range(len(columns)), columns)
        ax.set(xlabel="nodes x devices per node", ylabel="AMP throughput / FP32 throughput",
               title=f"{model}: mixed precision over FP32 (medians, same configuration)")
        ax.grid(axis="x", visible=False)
        ax.legend(ncols=min(4, len(series) + 1), loc="upper left")
        yield f"amp_{model}.png", fig


# ---- bus bandwidth ---------------------------------------------------------------------------
def _op_order(op) -> int:
    return busbw.OPS.index(op) if op in busbw.OPS else len(busbw.OPS)


def busbw_plots(data):
    comm = data.comm
    # a point of one rank moves nothing and has no bandwidth to draw (contract/busbw.py's moves)
    data = comm[comm.op.notna() & comm.busbw_avg.notna()] if comm is not None and len(comm) else None
    if data is None or not len(data):
        return "no collective measurements (bench=comm)"
    data = data[data.busbw_avg > 0]   # a log scale; one rank's bus bandwidth is 0 (2(n-1)/n)
    if not len(data):
        return "no bus bandwidth above 0 (one rank moves nothing between ranks)"
    node_counts = sorted(int(n) for n in data.nodes.unique())
    many = data[["framework", "dtype"]].drop_duplicates().shape[0] > 1
    fig, axes = style.panels(len(node_counts), sharey=True)
    for ax, nodes in zip(axes, node_counts):
        here = data[data.nodes == nodes]
        per_node = sorted(here.gpus_per_node.unique())
        for op, rows in sorted(here.groupby("op"), key=lambda kv: _op_order(kv[0])):
            place = not (rows.inplace == False).any()  # noqa: E712  out-of-place where it exists
            rows = rows[rows.inplace == place]
            for (gpn, fw, dtype, _), line in rows.groupby(["gpus_per_node", "framework", "dtype",
                                                           "point"]):
                line = line.sort_values("bytes")
                label = f"{op} {tables.allocation(nodes, gpn)}" + (f" {fw} {dtype}" if many else "") \
                    + (" (in-place)" if place else "")
                colour = style.op_colour(op)
                ax.plot(line.bytes, line.busbw_avg, marker="o", ms=3, color=colour, label=label,
                        linestyle=style.NODE_LINES[per_node.index(gpn) % len(style.NODE_LINES)])
                ax.fill_between(line.bytes, line.busbw_min, line.busbw_max, color=colour,
                                alpha=0.12)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: tables.human_bytes(x) if x >= 1 else ""))
        ax.tick_params(axis="x", labelrotation=45)
        ax.set(xlabel="message size", title=f"{nodes} node{'s' if nodes > 1 else ''}")
        ax.legend()
    axes[0].set_ylabel("bus bandwidth (GB/s; band: slowest..fastest rank)")
    fig.suptitle("Bus bandwidth against message size (nccl-tests method)")
    yield "busbw.png", fig


PLOTS = (("throughput", throughput_plots), ("scaling", scaling_plots),
         ("step time per rank", rank_step_plots), ("AMP over FP32", amp_plots),
         ("bus bandwidth", busbw_plots), ("checkpoint", checkpoint_plots))


def render(data, only=None):
    """(plots, skipped): every plot `data` (analysis.plots.data.of(results, comm)) has the
    data for, as PNG bytes, and one line per plot skipped, saying what it lacks; `only`:
    the titles of the plots to draw (default: all)."""
    plots, skipped = [], []
    with style.context():
        for title, make in PLOTS:
            if only is not None and title not in only:
                continue
            # a library's warning is a line of the report's, never Python's text on stderr
            with warnings.catch_warnings(record=True) as caught:   # matplotlib's are UserWarnings
                warnings.simplefilter("always", UserWarning)
                drawing, made = make(data), 0
                while True:  # each plot is drawn, turned into PNG bytes and closed in turn
                    try:
                        name, fig = next(drawing)
                    except StopIteration as end:   # a plot maker returns why it drew nothing
                        reason = end.value
                        break
                    plots.append(Plot(name, style.png(fig)))
                    made += 1
            if not made:
                skipped.append(f"plot skipped: {title}: {reason or 'no data for it'}")
            skipped += [f"plot {title}: warned: {m}" for m in dict.fromkeys(str(w.message) for w in caught)]
    return plots, skipped
