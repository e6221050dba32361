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


def _s(value) -> str:
    return tables.number(value, ".4g")


def render(table: pd.DataFrame, training: pd.DataFrame, rows: list) -> str:
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
        for (model, layout), g in table.groupby(["model", "layout"], sort=True):
            body = [[r.point if r.status == "ok" else f"{r.point} ({tables.label(r.status)})",
                     r.mode, tables.allocation(r.nodes, r.gpus_per_node),
                     "n/a" if tables.missing(r.bytes) else tables.human_bytes(r.bytes),
                     _s(r.blocked_s), _s(r.durable_s), _s(r.load_s), _s(r.gbps_per_node), _s(r.gbps),
                     _s(r.bare_gbps), tables.number(r.ratio, ".2f"), _s(r.load_gbps),
                     _s(r.bare_read_gbps)] for r in g.sort_values(["nodes", "ranks", "mode"]).itertuples()]
            parts.append(f"### {model}, {layout}\n" + tabulate(
                body, headers=["point", "mode", "nodes x ranks", "size", "blocked s", "durable s",
                               "load s", "GB/s per node", "GB/s", "bare GB/s", "ratio",
                               "load GB/s", "bare read GB/s"],
                tablefmt="github", disable_numparse=True))
        bad = table[table.status != "ok"]
        if len(bad):
            parts.append("\n".join(["### Checkpoint points that did not pass"]
                                   + [f"- {r.point}: {r.status}: {r.error}" for r in bad.itertuples()]))
    if len(training):
        body = [[r.point, r.layout, tables.allocation(r.nodes, r.gpus_per_node), r.every, r.mode,
                 tables.number(r.saves, ".0f"), _s(r.blocked_s), _s(r.durable_s),
                 tables.number(r.throughput, ".1f"), tables.number(r.baseline_throughput, ".1f"),
                 tables.number(r.ratio, ".2f")] for r in training.itertuples()]
        parts.append("### Training with checkpoints (checkpoint.every) against without\n" + tabulate(
            body, headers=["point", "layout", "nodes x ranks", "every", "mode", "saves timed",
                           "blocked s per save", "durable s per save", "samples/s",
                           "samples/s without", "ratio"], tablefmt="github", disable_numparse=True)
            + "\nwithout: the same point with no checkpoint (the same sweep's where it ran one); "
              "blank where none ran.")
    if parts and rows:
        body = [[r.get("source"), r.get("date"), r.get("model"), r.get("gpus") or "n/a",
                 r.get("device") or "n/a", r.get("mode"), _s(r.get("blocked_s")),
                 _s(r.get("background_s")), r.get("note", "")] for r in rows]
        parts.append("### Published checkpoint times, for scale (other models, devices and "
                     "filesystems: none is set beside a point)\n" + tabulate(
                         body, headers=["source", "date", "model", "GPUs", "device", "mode",
                                        "blocked s", "background s", "note"],
                         tablefmt="github", disable_numparse=True))
    return "\n\n".join(parts)


def section(results) -> str:
    return render(checkpoint_table(results), training_table(results), sources.checkpoint_rows())
