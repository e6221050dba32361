"""The collectives' figures (bench=comm, docs/comm.md): a row per point x op x size x in-place
setting, from what analysis.load read (this module reads no file), for the report's section
(analysis/sections/comm.py), comm.csv and the bus-bandwidth plot (analysis/plots/draw.py).

The rows are aggregated over the ranks and the recorded repeats of the point, the way
nccl-tests aggregates its ranks: the time is the mean over ranks (and repeats), and
`algbw_avg` / `busbw_avg` are computed from that mean time (nccl-tests' default `-a 1`);
`*_min` / `*_max` are the extremes of the per-rank figures. The uneven all-to-all
(all_to_allv) adds `imbalance`: the largest rank's received bytes over the mean's
(contract/busbw.py). A point of one rank has times and no bandwidth (contract/busbw.py's
`moves`: one rank moves nothing), whatever an older record holds. A point with no measurement
at all (it failed before its first) still gets one row, with op empty, so that it is never silently dropped.
"""
import pandas as pd

from contract import busbw

COLUMNS = ["sweep", "point", "framework", "device", "backend", "nodes", "gpus_per_node", "ranks",
           "op", "bytes", "count", "dtype", "inplace", "iters", "repeats", "time_s",
           "algbw_avg", "algbw_min", "algbw_max", "busbw_avg", "busbw_min", "busbw_max",
           "wrong", "imbalance", "status", "error"]
OP_ORDER = {op: i for i, op in enumerate(busbw.OPS)}


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
            bw = busbw.moves(world)   # one rank: no bandwidth, whatever its record says
            wrong = pd.to_numeric(g.wrong, errors="coerce").sum(min_count=1)
            rows.append({**base, "op": op, "bytes": int(nbytes), "count": int(g["count"].iloc[0]),
                         "dtype": g["dtype"].iloc[0], "inplace": bool(inplace),
                         "iters": int(g.iters.iloc[0]), "repeats": g.repeat.nunique(), "time_s": t,
                         "algbw_avg": busbw.algbw_gbps(nbytes, t) if bw else None,
                         "algbw_min": g.algbw_gbps.min() if bw else None,
                         "algbw_max": g.algbw_gbps.max() if bw else None,
                         "busbw_avg": busbw.busbw_gbps(op, nbytes, t, world) if bw else None,
                         "busbw_min": g.busbw_gbps.min() if bw else None,
                         "busbw_max": g.busbw_gbps.max() if bw else None,
                         "wrong": None if pd.isna(wrong) else int(wrong),
                         "imbalance": pd.to_numeric(g.imbalance, errors="coerce").max()})
    df = pd.DataFrame(rows, columns=COLUMNS)
    if len(df):
        df = df.assign(_o=df.op.map(OP_ORDER)).sort_values(
            ["_o", "nodes", "ranks", "point", "bytes", "inplace"], na_position="last")
        df = df.drop(columns="_o").reset_index(drop=True)
    return df
