"""How every plot of the report looks, in one place: sizes, fonts, a colour per framework (its
adapter's), a marker, line and hatch per precision, a colour per collective, and PNG output.

analysis/plots/draw.py draws; it takes every visual choice from here, so that a framework has
the same colour in each plot and a plot restyled is restyled everywhere.
"""
import io

import matplotlib
from matplotlib import colors
from matplotlib.figure import Figure  # not pyplot: no display, no global figure registry

from frameworks import registry       # the adapters only: no framework is imported

FIGSIZE = (7.0, 4.4)          # one panel
PANEL = (4.6, 4.2)            # each of several panels side by side
DPI = 110
RC = {"font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9, "legend.fontsize": 7.5,
      "xtick.labelsize": 8, "ytick.labelsize": 8, "axes.grid": True, "grid.alpha": 0.3,
      "axes.spines.top": False, "axes.spines.right": False, "legend.frameon": False,
      "savefig.bbox": "tight"}

OTHER_COLOUR = "#555555"      # a name no framework's adapter declares
PRECISION_MARKERS = {"fp32": "o", "amp": "s"}
PRECISION_LINES = {"fp32": "-", "amp": "--"}
PRECISION_HATCHES = {"fp32": "", "amp": "///"}
IDEAL = {"color": "black", "linestyle": ":", "linewidth": 1.2, "label": "ideal (linear)"}
OP_COLOURS = {"all_reduce": "#1f77b4", "broadcast": "#d62728", "reduce": "#2ca02c",
              "all_gather": "#9467bd", "reduce_scatter": "#ff7f0e", "all_to_all": "#8c564b"}
NODE_LINES = ("-", "--", "-.", ":")     # one per ranks-per-node count within one node-count panel
WHISKER = {"capsize": 3, "elinewidth": 1, "ecolor": "#333333"}


def framework_colour(framework, shade: int = 0) -> str:
    """The framework's colour, the same in every plot: its adapter's (frameworks/registry.py,
    close to its own logo's), or the registry's palette's for one that declares none;
    `shade` 1, 2, ... lightens it for further series of the same framework and precision
    (other batch sizes or modes)."""
    name = str(framework)
    base = colors.to_rgb(registry.colour(registry.get(name)) if name in registry.names() else OTHER_COLOUR)
    mix = min(0.6, 0.25 * shade)
    r, g, b = (c + (1 - c) * mix for c in base)
    return colors.to_hex((r, g, b))


def marker(precision) -> str:
    return PRECISION_MARKERS.get(str(precision), "^")


def line(precision) -> str:
    return PRECISION_LINES.get(str(precision), "-.")


def hatch(precision) -> str:
    return PRECISION_HATCHES.get(str(precision), "..")


def op_colour(op) -> str:
    return OP_COLOURS.get(str(op), OTHER_COLOUR)


def new_plot(**kw):
    """(fig, ax): a plot of one panel."""
    fig = Figure(figsize=FIGSIZE)
    return fig, fig.subplots(**kw)


def panels(n: int, **kw):
    """(fig, [ax, ...]): n panels side by side (one at FIGSIZE)."""
    fig = Figure(figsize=FIGSIZE if n == 1 else (PANEL[0] * n, PANEL[1]))
    return fig, list(fig.subplots(1, n, squeeze=False, **kw)[0])


def png(fig) -> bytes:
    """The plot as PNG bytes (Agg, matplotlib's raster backend: no display needed)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def warm() -> None:
    """One small plot drawn and dropped, in this look: the first plot's one-off costs
    (fonts loaded, the PNG encoder imported) paid before the report's plots come."""
    with context():
        fig, ax = new_plot()
        ax.plot([1, 2], [1, 2], marker(None), label="warm")
        ax.set(title="warm", xlabel="x", ylabel="y")
        ax.legend()
        png(fig)


def context():
    """The report's rc settings, for `with plot_style.context(): ...` (never global: a
    notebook that imports the analysis keeps its own style)."""
    return matplotlib.rc_context(RC)
