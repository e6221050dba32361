"""Collective benchmarks (bench=comm, docs/comm.md) -> a DataFrame and nccl-tests-style tables,
from what analysis.load read (this module reads no file); the bus-bandwidth plot is
analysis/plot.py's. Training points are left to analysis/report.py.

One row per point x op x size x in-place setting, aggregated over the ranks and the
recorded repeats of the point, the way nccl-tests aggregates its ranks: the time is
the mean over ranks (and repeats), and `algbw_avg` / `busbw_avg` are computed from
that mean time (nccl-tests' default `-a 1`); `*_min` / `*_max` are the extremes of
the per-rank figures. The uneven all-to-all (all_to_allv) adds `imbalance`: the largest
rank's received bytes over the mean's (contract/busbw.py). A point with no measurement at all (it failed before its
first) still gets one row, with op empty, so that it is never silently dropped.
"""
import pandas as pd
from tabulate import tabulate

from analysis import tables
from contract import busbw

COLUMNS = ["sweep", "point", "framework", "device", "backend", "nodes", "gpus_per_node", "ranks",
           "op", "bytes", "count", "dtype", "inplace", "iters", "repeats", "time_s",
           "algbw_avg", "algbw_min", "algbw_max", "busbw_avg", "busbw_min", "busbw_max",
           "wrong", "imbalance", "status", "error"]
_OP_ORDER = {op: i for i, op in enumerate(busbw.OPS)}


def _environment(results, sweep, point) -> dict:
    """The first rank environment recorded for a point (repeats, then ranks, in order)."""
    return next((e["environment"] for e in results.environments
                 if e["sweep"] == sweep and e["point"] == point and e["environment"]), {})


def comm_table(results) -> pd.DataFrame:
    """Every bench=comm point of the results (analysis.load), one row per op x size x
    in-place setting; a point with no measurement gets one row with op empty."""
    rows = []
    points = results.points
    comm_points = points[points.bench == "comm"] if len(points) else points
    meas_all = results.comm
    for p in comm_points.itertuples():
        world = p.devices
        env = _environment(results, p.sweep, p.point)
        mine = results.runs_of(p.sweep, p.point)
        mine = mine[mine.status != "ok"] if len(mine) else mine
        errors = [f"repeat {r.repeat}: {r.error}" for r in mine.itertuples() if r.error]
        opts = results.manifest(p.sweep, p.point).get("bench_options") or {}
        base = {"sweep": p.sweep, "point": p.point, "framework": p.framework,
                "device": env.get("device"), "backend": env.get("backend"), "nodes": p.nodes,
                "gpus_per_node": p.gpus_per_node, "ranks": world, "dtype": opts.get("dtype"),
                "status": p.status, "error": errors[0] if errors else None}
        meas = meas_all[(meas_all.sweep == p.sweep) & (meas_all.point == p.point)]
        if not len(meas):
            rows.append(base)
            continue
        for (op, nbytes, inplace), g in meas.groupby(["op", "bytes", "inplace"], sort=False):
            t = g.time_s.mean()
            wrong = pd.to_numeric(g.wrong, errors="coerce").sum(min_count=1)
            rows.append({**base, "op": op, "bytes": int(nbytes), "count": int(g["count"].iloc[0]),
                         "dtype": g["dtype"].iloc[0], "inplace": bool(inplace),
                         "iters": int(g.iters.iloc[0]), "repeats": g.repeat.nunique(), "time_s": t,
                         "algbw_avg": busbw.algbw_gbps(nbytes, t), "algbw_min": g.algbw_gbps.min(),
                         "algbw_max": g.algbw_gbps.max(),
                         "busbw_avg": busbw.busbw_gbps(op, nbytes, t, world),
                         "busbw_min": g.busbw_gbps.min(), "busbw_max": g.busbw_gbps.max(),
                         "wrong": None if pd.isna(wrong) else int(wrong),
                         "imbalance": pd.to_numeric(g.imbalance, errors="coerce").max()})
    df = pd.DataFrame(rows, columns=COLUMNS)
    if len(df):
        df = df.assign(_o=df.op.map(_OP_ORDER)).sort_values(
            ["_o", "nodes", "ranks", "point", "bytes", "inplace"], na_position="last")
        df = df.drop(columns="_o").reset_index(drop=True)
    return df


def load_comm(path) -> pd.DataFrame:
    """comm_table of every sweep under `path` (a sweep folder or a folder of sweeps)."""
    from analysis.load import load

    return comm_table(load(path))


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
                     f"{tables.number(r.busbw_min, '.3f')}-{tables.number(r.busbw_max, '.3f')}",
                     "n/a" if tables.missing(r.wrong) else str(int(r.wrong))]
        body.append(line)
    return tabulate(body, headers=headers, tablefmt="github", disable_numparse=True)


def avg_busbw(rows: pd.DataFrame) -> float:
    """nccl-tests' "Avg bus bandwidth" of one op of one point: mean over sizes and variants."""
    return busbw.avg_busbw(rows.busbw_avg)


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
        grid = {}
        for (fw, dtype, op, nodes, gpn), g in data.groupby(
                ["framework", "dtype", "op", "nodes", "gpus_per_node"], sort=False):
            per_point = [avg_busbw(p) for _, p in g.groupby("point")]
            cell = f"{sum(per_point) / len(per_point):.3f}"
            if (g.status != "ok").any():
                cell += "!"
            grid.setdefault((fw, dtype, op), {})[tables.allocation(nodes, gpn)] = cell
        body = [[fw, dtype, op] + [cells.get(c, "-") for c in cols]
                for (fw, dtype, op), cells in sorted(grid.items(), key=lambda kv: (
                    kv[0][0], kv[0][1], _OP_ORDER.get(kv[0][2], 99)))]
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
            parts += [title, _op_table(rows), f"Avg bus bandwidth: {avg_busbw(rows):.3f} GB/s"]
    bad = df[df.status != "ok"].drop_duplicates("point")
    if len(bad):
        lines = [f"- {r.point}: {r.status}: {r.error}" for r in bad.itertuples()]
        parts.append("\n".join(["### Collective points failed, cut short or missing", *lines]))
    return "\n\n".join(parts)
