"""The report's checkpoint section (docs/checkpoint.md): a table per model and layout of
bench=checkpoint's points, one of training with checkpoint.every beside the same point without
(their figures: analysis/figures/checkpoint.py), and the published figures
(analysis/published/*.yaml, `figure: checkpoint`).
"""
import pandas as pd
from tabulate import tabulate

from analysis import tables
from analysis.figures.checkpoint import checkpoint_table, training_table
from analysis.published import sources


def _cell(value) -> str:
    return tables.number(value, ".4g")


def render(table: pd.DataFrame, training: pd.DataFrame, published: list) -> str:
    """Markdown: the checkpoint table per model and layout, training with checkpoints, and the
    published figures."""
    parts = []
    if len(table):
        parts.append("## Checkpoints (torch.distributed.checkpoint; docs/checkpoint.md)")
        parts.append("Per point, medians over its ok repeats of the slowest rank: size = bytes "
                     "written by all ranks; blocked = training stopped (async: staging only); "
                     "durable = until every file is fsynced and the checkpoint committed; GB/s "
                     "= size / durable (1e9 bytes), per node = / nodes; bare = the same bytes "
                     "written by the same ranks to plain files with fsync; ratio = GB/s / bare "
                     "GB/s. A load is checked against the save: a difference fails the repeat.")
        for (model, layout), points in table.groupby(["model", "layout"], sort=True):
            body = [[row.point if row.status == "ok" else f"{row.point} ({tables.label(row.status)})",
                     row.mode, tables.allocation(row.nodes, row.gpus_per_node),
                     "n/a" if tables.missing(row.bytes) else tables.human_bytes(row.bytes),
                     _cell(row.blocked_s), _cell(row.durable_s), _cell(row.load_s),
                     _cell(row.gbps_per_node), _cell(row.gbps), _cell(row.bare_gbps),
                     tables.number(row.ratio, ".2f"), _cell(row.load_gbps), _cell(row.bare_read_gbps)]
                    for row in points.sort_values(["nodes", "ranks", "mode"]).itertuples()]
            parts.append(f"### {model}, {layout}\n" + tabulate(
                body, headers=["point", "mode", "nodes x ranks", "size", "blocked s", "durable s",
                               "load s", "GB/s per node", "GB/s", "bare GB/s", "ratio",
                               "load GB/s", "bare read GB/s"],
                tablefmt="github", disable_numparse=True))
        bad = table[table.status != "ok"]
        if len(bad):
            parts.append("\n".join(["### Checkpoint points that did not pass"]
                                   + [f"- {row.point}: {row.status}: {row.error}" for row in bad.itertuples()]))
    if len(training):
        body = [[row.point, row.layout, tables.allocation(row.nodes, row.gpus_per_node), row.every,
                 row.mode, tables.number(row.saves, ".0f"), _cell(row.blocked_s), _cell(row.durable_s),
                 tables.number(row.throughput, ".1f"), tables.number(row.baseline_throughput, ".1f"),
                 tables.number(row.ratio, ".2f")] for row in training.itertuples()]
        parts.append("### Training with checkpoints (checkpoint.every) against without\n" + tabulate(
            body, headers=["point", "layout", "nodes x ranks", "every", "mode", "saves timed",
                           "blocked s per save", "durable s per save", "samples/s",
                           "samples/s without", "ratio"], tablefmt="github", disable_numparse=True)
            + "\nwithout: the same point with no checkpoint (the same sweep's where it ran one); "
              "blank where none ran.")
    if parts and published:
        body = [[row.get("source"), row.get("date"), row.get("model"), row.get("gpus") or "n/a",
                 row.get("device") or "n/a", row.get("mode"), _cell(row.get("blocked_s")),
                 _cell(row.get("background_s")), row.get("note", "")] for row in published]
        parts.append("### Published checkpoint times, for scale (other models, devices and "
                     "filesystems: none is set beside a point)\n" + tabulate(
                         body, headers=["source", "date", "model", "GPUs", "device", "mode",
                                        "blocked s", "background s", "note"],
                         tablefmt="github", disable_numparse=True))
    return "\n\n".join(parts)


def section(results) -> str:
    return render(checkpoint_table(results), training_table(results), sources.checkpoint_rows())
