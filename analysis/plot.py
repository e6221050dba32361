"""Speedup against device count, with the ideal line: one PNG per model."""
import matplotlib

matplotlib.use("Agg")  # files only; no display on cluster login nodes
import matplotlib.pyplot as plt  # noqa: E402


def speedup_plots(points, out_dir) -> list:
    """Write speedup_<model>.png files; returns their paths."""
    paths = []
    from analysis.special import OWN_SECTIONS  # their figures are not a scaling curve
    train = points[(points.bench == "train") & points.speedup.notna()
                   & ~points.model.isin(OWN_SECTIONS)]
    for model, pts in train.groupby("model"):
        fig, ax = plt.subplots(figsize=(6, 4.5))
        top = int(pts.devices.max())
        ax.plot([1, top], [1, top], "k--", lw=1, label="ideal")
        for (fw, prec, bs, comp), line in pts.groupby(["framework", "precision", "batch_size",
                                                         "compile"]):
            line = line.sort_values("devices")
            label = f"{fw} {prec} bs{bs}" + (" compile" if comp else "")
            ax.plot(line.devices, line.speedup, "o-", label=label)
        ax.set(xlabel="devices", ylabel="speedup over 1 device", title=f"{model}: scaling")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        path = f"{out_dir}/speedup_{model}.png"
        fig.savefig(path, dpi=100, bbox_inches="tight")
        plt.close(fig)
        paths.append(path)
    return paths
