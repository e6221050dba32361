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
    places = [inplace for inplace in (False, True) if (rows.inplace == inplace).any()]
    headers = ["size", "bytes", "count"]
    uneven = rows.imbalance.notna().any()
    if uneven:
        headers.append("recv max/mean")
    for inplace in places:
        tag = "in-place" if inplace else "out-of-place"
        headers += [f"{tag} time (us)", "algbw (GB/s)", "busbw (GB/s)", "busbw min-max", "#wrong"]
    body = []
    for nbytes, sized in rows.groupby("bytes", sort=True):
        line = [tables.human_bytes(nbytes), str(nbytes), str(sized["count"].iloc[0])]
        if uneven:
            line.append(tables.number(sized.imbalance.max(), ".2f"))
        for inplace in places:
            variant = sized[sized.inplace == inplace]
            if not len(variant):
                line += ["-"] * 5
                continue
            row = variant.iloc[0]
            line += [tables.number(row.time_s * 1e6, ".1f"), tables.number(row.algbw_avg, ".3f"),
                     tables.number(row.busbw_avg, ".3f"),
                     "n/a" if tables.missing(row.busbw_min)
                     else f"{tables.number(row.busbw_min, '.3f')}-{tables.number(row.busbw_max, '.3f')}",
                     "n/a" if tables.missing(row.wrong) else str(int(row.wrong))]
        body.append(line)
    return tabulate(body, headers=headers, tablefmt="github", disable_numparse=True)


def avg_busbw(rows: pd.DataFrame):
    """nccl-tests' "Avg bus bandwidth" of one op of one point: mean over sizes and variants;
    None at one rank, which moves nothing (contract/busbw.py's `moves`)."""
    values = rows.busbw_avg.dropna()
    return busbw.avg_busbw(values) if len(values) else None


ONE_RANK = "none: one rank moves nothing (times only)"


def render_comm(table: pd.DataFrame) -> str:
    """Markdown: a summary of average bus bandwidth, then a table per collective and allocation
    (`table`: analysis/figures/comm.py's comm_table)."""
    if not len(table):
        return ""
    parts = ["## Collective communication (nccl-tests method, GB/s = 1e9 bytes/s)"]
    data = table[table.op.notna()]
    if len(data):
        allocations = (data[["nodes", "gpus_per_node", "ranks"]].drop_duplicates()
                       .sort_values(["ranks", "nodes"]))
        cols = [tables.allocation(nodes, gpn) for nodes, gpn in zip(allocations.nodes, allocations.gpus_per_node)]
        grid: dict = {}
        for (fw, dtype, op, nodes, gpn), measured in data.groupby(
                ["framework", "dtype", "op", "nodes", "gpus_per_node"], sort=False):
            per_point = [avg for _, point_rows in measured.groupby("point")
                         if (avg := avg_busbw(point_rows)) is not None]
            cell = f"{sum(per_point) / len(per_point):.3f}" if per_point else "n/a (1 rank)"
            if (measured.status != "ok").any():
                cell += "!"
            grid.setdefault((fw, dtype, op), {})[tables.allocation(nodes, gpn)] = cell
        body = [[fw, dtype, op] + [cells.get(col, "-") for col in cols]
                for (fw, dtype, op), cells in sorted(grid.items(), key=lambda kv: (
                    kv[0][0], kv[0][1], OP_ORDER.get(kv[0][2], 99)))]
        parts.append("### Average bus bandwidth (GB/s, mean over sizes and in/out-of-place; "
                     "columns: nodes x ranks per node; ! = a repeat did not pass)")
        parts.append(tabulate(body, headers=["framework", "dtype", "op"] + cols, tablefmt="github",
                              disable_numparse=True))
        for (op, nodes, ranks, point), rows in data.groupby(["op", "nodes", "ranks", "point"], sort=False):
            first = rows.iloc[0]
            said = (first["framework"], first["backend"], first["device"], first["dtype"])
            where = ", ".join(str(part) for part in said if not tables.missing(part))
            title = (f"### {op}: {nodes} node(s) x {first.gpus_per_node} = {ranks} ranks ({where}; "
                     f"{first.iters} iterations, {first.repeats} repeat(s)) [{point}]")
            if first.status != "ok":
                title += f" {str(first.status).upper()}"
            avg = avg_busbw(rows)
            parts += [title, _op_table(rows),
                      f"Avg bus bandwidth: {ONE_RANK if avg is None else f'{avg:.3f} GB/s'}"]
    bad = table[table.status != "ok"].drop_duplicates("point")
    if len(bad):
        lines = [f"- {row.point}: {row.status}: {row.error}" for row in bad.itertuples()]
        parts.append("\n".join(["### Collective points failed, cut short or missing", *lines]))
    return "\n\n".join(parts)
