"""The link test between nodes, in a constant number of rounds (docs/health.md, "Links").

Testing every pair of N nodes takes N(N-1)/2 transfers; at 1,000 nodes that is half a
million. Here each round is a ring: node i sends to node (i + stride) mod N and receives
from node (i - stride) mod N, all at once, so every node sends once and receives once per
round and a round costs one transfer's time whatever N. Two rounds with different strides
give every node two outgoing and two incoming links, to and from different partners:

- a node whose two outgoing (or two incoming) links are both slow is a slow node: its
  port, NIC or host is the cause, whoever is at the other end;
- a slow link whose ends are fine in the other round is a slow link: the path between
  those two nodes (a cable, a switch port), not either node.

The second stride is N // 2 (at least 2): a ring across the fabric's far side, so the two
rounds do not share a switch path where the first one stays near. With 2 nodes both
strides meet the same partner, and a slow node cannot be told from a slow link.

`schedule` and `diagnose` are plain arithmetic (tested at 1,000 nodes); `measure` moves
the bytes with torch.distributed's point-to-point operations (gloo on CPU, NCCL on GPUs),
one rank per node: the node's first. Standard library only, but `measure` imports torch.
"""
import time

SLOW_NODE_SENDS = "sends slowly"
SLOW_NODE_RECEIVES = "receives slowly"


def strides(nodes: int) -> list:
    """The rounds' strides: [1, max(2, N // 2)]; one round for 2 nodes, none for 1."""
    if nodes < 2:
        return []
    if nodes == 2:
        return [1]
    return [1, max(2, nodes // 2)]


def schedule(nodes: int) -> list:
    """[(stride, [(src, dst), ...]), ...]: who sends to whom in each round (node indices)."""
    return [(s, [(i, (i + s) % nodes) for i in range(nodes)]) for s in strides(nodes)]


def partners(node: int, nodes: int, stride: int) -> tuple:
    """(the node it sends to, the node it receives from) in the round of `stride`."""
    return (node + stride) % nodes, (node - stride) % nodes


def diagnose(nodes: int, slow: set) -> dict:
    """What the slow directed links (src, dst) of the schedule say:
    {"nodes": {node: why}, "links": [(src, dst)], "ambiguous": bool}. A node is named when
    both of its outgoing, or both of its incoming, links are slow (with 3 or more nodes
    they lead to different partners); it explains every slow link it is an end of (a port
    that sends slowly also delays the acknowledgements of what it receives). Every other
    slow link is a slow link of its own. With 2 nodes nothing can be pinned on a node
    (`ambiguous`)."""
    rounds = strides(nodes)
    if nodes < 2:
        return {"nodes": {}, "links": [], "ambiguous": False}
    if nodes == 2:
        return {"nodes": {}, "links": sorted(slow), "ambiguous": bool(slow)}
    named = {}
    for node in range(nodes):
        outs = [partners(node, nodes, s)[0] for s in rounds]
        ins = [partners(node, nodes, s)[1] for s in rounds]
        why = []
        if all((node, dst) in slow for dst in outs):
            why.append(SLOW_NODE_SENDS)
        if all((src, node) in slow for src in ins):
            why.append(SLOW_NODE_RECEIVES)
        if why:
            named[node] = " and ".join(why)
    links = sorted((src, dst) for src, dst in slow if src not in named and dst not in named)
    return {"nodes": named, "links": links, "ambiguous": False}


# ---- the measurement (one rank per node; every rank of the job takes part in the barriers) --
def measure(dist, gpus_per_node: int, nbytes: int, iters: int, device: str = "cpu") -> list:
    """Run the schedule over the job's node leaders (rank node * gpus_per_node) -> for
    this rank, [{src, dst, stride, bytes, seconds}] of the links it received on (empty on a
    rank that leads no node): the best of `iters` transfers, so that a late start of one
    transfer (a barrier left a moment later) is not taken for a slow link."""
    import torch
    import torch.distributed as td

    nodes = dist.world_size // gpus_per_node
    me = dist.rank // gpus_per_node if dist.rank % gpus_per_node == 0 else None
    out = []
    send = torch.ones(nbytes, dtype=torch.uint8, device=device) if me is not None else None
    recv = torch.empty(nbytes, dtype=torch.uint8, device=device) if me is not None else None
    for stride, _ in schedule(nodes):
        best = None
        for i in range(iters + 1):  # the first, of a few bytes, opens the pair's connection
            td.barrier()
            if me is None:
                continue
            to, frm = partners(me, nodes, stride)
            size = nbytes if i else 1024
            t0 = time.perf_counter()
            reqs = td.batch_isend_irecv([td.P2POp(td.isend, send[:size], to * gpus_per_node),
                                         td.P2POp(td.irecv, recv[:size], frm * gpus_per_node)])
            reqs[1].wait()
            if device != "cpu":
                torch.cuda.synchronize()
            took = time.perf_counter() - t0
            reqs[0].wait()
            if i:
                best = took if best is None else min(best, took)
        td.barrier()
        if me is not None:
            frm = partners(me, nodes, stride)[1]
            out.append({"src": frm, "dst": me, "stride": stride, "bytes": nbytes, "seconds": best})
    return out
