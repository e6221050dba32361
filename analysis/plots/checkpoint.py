"""The report's checkpoint plot (docs/checkpoint.md): checkpoint.png, GB/s in all against
nodes, a line per model, layout, mode and ranks per node (solid: the checkpoint's durable write;
dashed, the same colour: the bare write of the same bytes by the same ranks), from
analysis/figures/checkpoint.py's table. Drawn by analysis/plots/draw.py with the report's other
plots.
"""
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from analysis.plots import style
from analysis.plots.data import numeric

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f")
MARKERS = {"sync": "o", "async": "s"}


def checkpoint_plots(data):
    table = getattr(data, "checkpoint", None)
    have = table[numeric(table.gbps).notna()] if table is not None and len(table) else None
    if have is None or not len(have):
        return "no checkpoint point has a figure (bench=checkpoint)"
    fig, ax = style.new_plot()
    groups = list(have.groupby(["model", "layout", "mode", "gpus_per_node"], sort=True))
    for i, ((model, layout, mode, gpn), rows) in enumerate(groups):
        rows = rows.sort_values("nodes").drop_duplicates("nodes")
        colour = COLOURS[i % len(COLOURS)]
        label = f"{model} {layout}, {mode}, {gpn} ranks/node"
        ax.plot(rows.nodes, numeric(rows.gbps), color=colour, marker=MARKERS.get(mode, "^"),
                label=f"{label}: checkpoint")
        ax.plot(rows.nodes, numeric(rows.bare_gbps), color=colour, linestyle="--",
                marker=MARKERS.get(mode, "^"), fillstyle="none", label=f"{label}: bare write")
    nodes = sorted({int(n) for n in have.nodes})
    ax.set_yscale("log")
    ax.xaxis.set_major_locator(FixedLocator(nodes))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlim(nodes[0] - 0.5, nodes[-1] + 0.5)
    ax.set(xlabel="nodes", ylabel="GB/s in all (1e9 bytes/s; medians of the repeats)",
           title="Checkpoint write until durable, against the bare write of the same bytes")
    ax.legend()
    yield "checkpoint.png", fig
