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
    flagged = sum(bool(n["flags"]) for n in found)
    if flagged:
        lines.append(f"FLAG: {flagged} of {len(found)} NCCL point(s) did not use the network they should")
    for n in found:
        used = "; ".join(f"{what} on rank(s) {_ranks(rs)}" for what, rs in n["used"])
        lines.append(f"- {n['point']} ({n['nodes']} node{'s' if n['nodes'] != 1 else ''}): {used}")
        lines += [f"  - FLAG: {flag}" for flag in n["flags"]]
    return "\n".join(lines)


def _ranks(ranks) -> str:
    return ", ".join(str(r) for r in ranks)
