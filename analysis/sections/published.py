"""The report's "Published figures beside ours": each published row (analysis/published/)
that matches a point of a full-size model, with ours / published (the rows and the rule of a
match: analysis/published/sources.py).
"""
import os

from tabulate import tabulate

from analysis import tables
from analysis.figures import matching
from analysis.published.sources import PUBLISHED_DIR, PublishedError, beside, describe, names, read_source


def section(results, folder: str = PUBLISHED_DIR) -> str:
    """The report's "Published figures beside ours"; empty when no point matches a row."""
    points = results.points
    if not len(points) or "device" not in points:
        return ""
    train = points[(points.bench == "train") & points.throughput.notna()]
    # published figures are of GPUs: no file is read for points whose device has no family
    train = train[[matching.device_key(device).family is not None for device in train.device]]
    if not len(train):
        return ""
    lines, published = [], []
    for name in names(folder):
        try:
            published += read_source(os.path.join(folder, f"{name}.yaml"))["rows"]
        except PublishedError as exc:
            lines.append(f"- skipped: {exc}")
    found = beside(train, published)
    if not found:
        return ""
    body = []
    for point, row, ratio in found:
        body.append([point.model, point.framework, point.precision + (" compile" if point.compile else ""),
                     str(point.batch_size), tables.allocation(point.nodes, point.gpus_per_node),
                     str(point.device), f"{point.throughput:.1f}" + ("*" if point.status == "partial" else ""),
                     f"{row['throughput']:.1f}" + (" (derived)" if row["derived"] else "")
                     + (f" (bs {row['batch_size']})" if row.get("other_batch") else ""),
                     f"{ratio:.2f}", describe(row)])
    text = ["## Published figures beside ours",
            "Each published row (analysis/published/) whose device, framework, model, precision, "
            "device count and batch per device (where the row names one) match a point of a "
            "full-size model; ratio = ours / published. A point with no row at its batch is set "
            "beside the rows at another batch, whose batch is given: (bs N). (derived): the "
            "1-device figure the row's stated speedup implies (its throughput / speedup). Ours: "
            "synthetic data, no input pipeline; published rows say their data.", "",
            tabulate(body, headers=["model", "framework", "precision", "batch/dev", "nodes x dev",
                                    "our device", "ours (samples/s)", "published", "ours/published",
                                    "source"], tablefmt="github", disable_numparse=True)]
    return "\n".join(text + lines)
