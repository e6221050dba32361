"""The network NCCL chose, per point: each NCCL point's ranks (every recorded repeat's, as
analysis.load read them: `Results.environments`' `nccl` and the node's InfiniBand ports), what
they used in words, and the flags of contract/nccl_net.py's rule (sockets on nodes that have
InfiniBand, on a multi-node point; another network than health.expect.nccl_transport). Reads
no file; the report's section is analysis/sections/network.py."""
from contract import nccl_net


def _expect(manifest: dict):
    health = manifest.get("health")
    expect = health.get("expect") if isinstance(health, dict) else None
    return expect.get("nccl_transport") if isinstance(expect, dict) else None


def networks(results) -> list:
    """One entry per NCCL point, in the points' order: {sweep, point, nodes, used (each
    network in words, with its ranks), flags}."""
    by_point: dict = {}
    for e in results.environments:
        if e.get("nccl"):
            by_point.setdefault((str(e["sweep"]), e["point"]), []).append(
                {"rank": e["rank"], "host": e["host"], "nccl": e["nccl"],
                 "ports": (e.get("environment") or {}).get("infiniband_ports")})
    out = []
    for p in results.points.itertuples():
        ranks = by_point.pop((str(p.sweep), p.point), None)
        if not ranks:
            continue
        manifest = results.manifest(p.sweep, p.point)
        nodes = int(manifest.get("nodes") or getattr(p, "nodes", 1) or 1)
        used: dict = {}
        for r in ranks:
            used.setdefault(nccl_net.describe(r["nccl"]), set()).add(r["rank"])
        out.append({"sweep": p.sweep, "point": p.point, "nodes": nodes,
                    "used": [(what, sorted(rs)) for what, rs in sorted(used.items())],
                    "flags": nccl_net.flags(ranks, nodes, _expect(manifest))})
    return out
