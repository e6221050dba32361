"""The report's collectives section (bench=comm, docs/comm.md): nccl-tests-style tables of
the collectives' figures (analysis/figures/comm.py's comm_table): the average bus bandwidth
per framework, op and allocation, then a table per op and point, out-of-place and in-place.
"""
import pandas as pd
from tabulate import tabulate

from analysis import tables
from analysis.figures.comm import OP_ORDER
from contract import busbw


def _op_table(rows: pd.DataFrame) -> str:
    """One op of one point as nccl-tests prints it: out-of-place, then in-place, columns."""
    places = [p for p in (False, True) if (rows.inplace == p).any()]
    headers = ["size", "bytes", "count"]
    uneven = rows.imbalance.notna().any()
    if uneven:
        headers.append("recv max/mean")
    for p in places:
        tag = "in-place" if p else "out-of-place"
        headers += [f"{tag} time (us)", "algbw (GB/s)", "busbw (GB/s)", "busbw min-max", "#wrong"]
    body = []
    for nbytes, g in rows.groupby("bytes", sort=True):
        line = [tables.human_bytes(nbytes), str(nbytes), str(g["count"].iloc[0])]
        if uneven:
            line.append(tables.number(g.imbalance.max(), ".2f"))
        for p in places:
            r = g[g.inplace == p]
            if not len(r):
                line += ["-"] * 5
                continue
            r = r.iloc[0]
            line += [tables.number(r.time_s * 1e6, ".1f"), tables.number(r.algbw_avg, ".3f"),
                     tables.number(r.busbw_avg, ".3f"),
                     "n/a" if tables.missing(r.busbw_min)
                     else f"{tables.number(r.busbw_min, '.3f')}-{tables.number(r.busbw_max, '.3f')}",
                     "n/a" if tables.missing(r.wrong) else str(int(r.wrong))]
        body.append(line)
    return tabulate(body, headers=headers, tablefmt="github", disable_numparse=True)


def avg_busbw(rows: pd.DataFrame):
    """nccl-tests' "Avg bus bandwidth" of one op of one point: mean over sizes and variants;
    None at one rank, which moves nothing (contract/busbw.py's `moves`)."""
    values = rows.busbw_avg.dropna()
    return busbw.avg_busbw(values) if len(values) else None


ONE_RANK = "none: one rank moves nothing (times only)"


def render_comm(df: pd.DataFrame) -> str:
    """Markdown: a summary of average bus bandwidth, then a table per collective and allocation."""
    if not len(df):
        return ""
    parts = ["## Collective communication (nccl-tests method, GB/s = 1e9 bytes/s)"]
    data = df[df.op.notna()]
    if len(data):
        allocations = (data[["nodes", "gpus_per_node", "ranks"]].drop_duplicates()
                       .sort_values(["ranks", "nodes"]))
        cols = [tables.allocation(n, g) for n, g in zip(allocations.nodes, allocations.gpus_per_node)]
        grid: dict = {}
        for (fw, dtype, op, nodes, gpn), g in data.groupby(
                ["framework", "dtype", "op", "nodes", "gpus_per_node"], sort=False):
            per_point = [v for _, p in g.groupby("point") if (v := avg_busbw(p)) is not None]
            cell = f"{sum(per_point) / len(per_point):.3f}" if per_point else "n/a (1 rank)"
            if (g.status != "ok").any():
                cell += "!"
            grid.setdefault((fw, dtype, op), {})[tables.allocation(nodes, gpn)] = cell
        body = [[fw, dtype, op] + [cells.get(c, "-") for c in cols]
                for (fw, dtype, op), cells in sorted(grid.items(), key=lambda kv: (
                    kv[0][0], kv[0][1], OP_ORDER.get(kv[0][2], 99)))]
        parts.append("### Average bus bandwidth (GB/s, mean over sizes and in/out-of-place; "
                     "columns: nodes x ranks per node; ! = a repeat did not pass)")
        parts.append(tabulate(body, headers=["framework", "dtype", "op"] + cols, tablefmt="github",
                              disable_numparse=True))
        for (op, nodes, ranks, point), rows in data.groupby(["op", "nodes", "ranks", "point"], sort=False):
            r0 = rows.iloc[0]
            where = ", ".join(str(x) for x in (r0["framework"], r0["backend"], r0["device"], r0["dtype"])
                              if not tables.missing(x))
            title = (f"### {op}: {nodes} node(s) x {r0.gpus_per_node} = {ranks} ranks ({where}; "
                     f"{r0.iters} iterations, {r0.repeats} repeat(s)) [{point}]")
            if r0.status != "ok":
                title += f" {str(r0.status).upper()}"
            avg = avg_busbw(rows)
            parts += [title, _op_table(rows),
                      f"Avg bus bandwidth: {ONE_RANK if avg is None else f'{avg:.3f} GB/s'}"]
    bad = df[df.status != "ok"].drop_duplicates("point")
    if len(bad):
        lines = [f"- {r.point}: {r.status}: {r.error}" for r in bad.itertuples()]
        parts.append("\n".join(["### Collective points failed, cut short or missing", *lines]))
    return "\n\n".join(parts)
