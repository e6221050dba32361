"""The report's "Network NCCL used" section: per NCCL point, the network its ranks' NCCL chose
(IB or RoCE and through which HCAs, a network plugin, or sockets) and NCCL's version, read from
NCCL's own lines (contract/nccl_net.py), and a FLAG where a multi-node point ran over sockets on
nodes that have InfiniBand, or used another network than health.expect.nccl_transport.
(analysis/figures/network.py gathers it; this module reads no file.)"""
from analysis.figures.network import networks


def section(results) -> str:
    found = networks(results)
    if not found:
        return ""
    lines = ["## Network NCCL used (NCCL's own INIT and NET lines; docs/health.md)"]
    flagged = sum(bool(point["flags"]) for point in found)
    if flagged:
        lines.append(f"FLAG: {flagged} of {len(found)} NCCL point(s) did not use the network they should")
    for point in found:
        used = "; ".join(f"{what} on rank(s) {_ranks(ranks)}" for what, ranks in point["used"])
        lines.append(f"- {point['point']} ({point['nodes']} node{'s' if point['nodes'] != 1 else ''}): {used}")
        lines += [f"  - FLAG: {flag}" for flag in point["flags"]]
    return "\n".join(lines)


def _ranks(ranks) -> str:
    return ", ".join(str(rank) for rank in ranks)
