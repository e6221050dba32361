"""The link test between nodes, in a constant number of rounds, and the rule that reads it
(docs/health.md, "Links").

Testing every pair of N nodes takes N(N-1)/2 transfers; at 1,000 nodes that is half a
million. Here each round is a ring: node i sends to node (i + stride) mod N and receives
from node (i - stride) mod N, all at once, so every node sends once and receives once per
round and a round costs one transfer's time whatever N. Two rounds with different strides
(1, then N // 2, at least 2: the second crosses the fabric where the first stays near)
give every node two outgoing and two incoming links, to and from different partners. With
2 nodes both strides meet the same partner: one round.

The rule, written once:

- The fabric's reference is the median link once the slow nodes are set aside, found in
  two passes. First each node's best link (what its port moves with a healthy partner),
  the median of those over the nodes (the higher middle one of an even count): a slow node
  gives one value of N to it, however many links it is an end of (4 of the 6 at 3 nodes:
  there the median link is its own), so fewer than half the nodes slow cannot drag it.
  Then the nodes slow against that are set aside, and the median of the other links is
  the reference: a typical healthy link, which one lucky fast link cannot lift.
- A link is slow below health.min_fraction of the reference, or below a floor that holds
  whatever the other links do: the site's expected rate (health.expect.link_gbytes_s), and
  the cap's (health.link_mb within health.link_cap_s: a transfer's size is capped to what
  its probe says it moves in that time, so a throttled link costs seconds, not minutes).
- A node all of whose outgoing links are slow sends slowly; all of whose incoming links are
  slow receives slowly. A node slow one way only, each of whose partners that way is
  firmly slow the other way (slow both ways, or with a partner of its own that is fine),
  is not named: those partners explain its links (two slow receivers that one node
  happens to send to). A named node explains every slow link it is an end of (a port that
  sends slowly also delays the acknowledgements of what it receives).
- Every other slow link is a slow link: the path between two nodes each fine on its other
  links (a cable, a switch port). With 2 nodes a slow node cannot be told from a slow link
  (`ambiguous`); with 3, two nodes slow both ways leave no fast link: only a floor judges.

`schedule`, `reference`, `judge` and `diagnose` are plain arithmetic (tested at 3, 4, 8
and 1,000 nodes); `measure` moves the bytes with torch.distributed's point-to-point
operations (gloo on CPU, NCCL on GPUs), one rank per node: the node's first. Standard
library only, but `measure` imports torch.
"""
import statistics
import time
from typing import Any

SLOW_NODE_SENDS = "sends slowly"
SLOW_NODE_RECEIVES = "receives slowly"
# Each round's probe, before its timed transfers: what sizes them to the cap. Small enough
# to take under 0.1 s above 20 Mbit/s, large enough to time past a connection's latency.
PROBE_BYTES = 256 * 1024


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


def best_link_median(rates: dict):
    """Each node's best link (in or out), the higher median of those over the nodes: a slow
    node gives one value of N to it. `rates`: (src, dst) -> rate. None without links."""
    best: dict = {}
    for (src, dst), rate in rates.items():
        for node in (src, dst):
            best[node] = max(best.get(node, rate), rate)
    return statistics.median_high(best.values()) if best else None


def _slow(rates: dict, reference, fraction: float, floors) -> dict:
    out = {}
    for link, rate in rates.items():
        why = [w for floor, w in floors if floor is not None and rate < floor]
        if reference is not None and rate < fraction * reference:
            why.insert(0, "reference")
        if why:
            out[link] = why
    return out


def reference(nodes: int, rates: dict, fraction: float, floors=()):
    """The fabric's reference: the median link of the nodes not found slow against the
    median of each node's best link (or that median, where every link has a slow end)."""
    first = best_link_median(rates)
    suspects = diagnose(nodes, _slow(rates, first, fraction, floors))["nodes"]
    clean = [r for (src, dst), r in rates.items() if src not in suspects and dst not in suspects]
    return statistics.median(clean) if clean else first


def judge(nodes: int, rates: dict, fraction: float, floors=()) -> dict:
    """The rule on measured rates ((src, dst) -> GB/s): {"reference", "slow": {(src, dst):
    [why]}, "nodes", "links", "ambiguous"}. A link's whys: "reference" (below `fraction` of
    it) and each floor it is below; `floors`: [(rate, why)], a why such as
    "health.expect.link_gbytes_s"."""
    ref = reference(nodes, rates, fraction, floors)
    slow = _slow(rates, ref, fraction, floors)
    return {"reference": ref, "slow": slow, **diagnose(nodes, slow)}


def _ways(nodes: int):
    """node -> (its outgoing links, its incoming links) in the schedule."""
    rounds = strides(nodes)
    return {n: ([(n, partners(n, nodes, s)[0]) for s in rounds],
                [(partners(n, nodes, s)[1], n) for s in rounds]) for n in range(nodes)}


def diagnose(nodes: int, slow) -> dict:
    """What the slow directed links (src, dst) of the schedule say (the rule above):
    {"nodes": {node: why}, "links": [(src, dst)], "ambiguous": bool}."""
    slow = set(slow)
    if nodes < 2:
        return {"nodes": {}, "links": [], "ambiguous": False}
    if nodes == 2:
        return {"nodes": {}, "links": sorted(slow), "ambiguous": bool(slow)}
    ways = _ways(nodes)
    sends = {n for n, (outs, _) in ways.items() if all(link in slow for link in outs)}
    receives = {n for n, (_, ins) in ways.items() if all(link in slow for link in ins)}
    # a one-way candidate whose partners are all candidates the other way may be theirs to
    # explain; a candidate is firm when it is slow both ways or has a partner that is fine
    firm_sends = {n for n in sends if n in receives
                  or not all(dst in receives for _, dst in ways[n][0])}
    firm_receives = {n for n in receives if n in sends
                     or not all(src in sends for src, _ in ways[n][1])}
    named = {}
    for n in range(nodes):
        why = []
        if n in firm_sends or (n in sends and not all(dst in firm_receives for _, dst in ways[n][0])):
            why.append(SLOW_NODE_SENDS)
        if n in firm_receives or (n in receives and not all(src in firm_sends for src, _ in ways[n][1])):
            why.append(SLOW_NODE_RECEIVES)
        if why:
            named[n] = " and ".join(why)
    links = sorted((src, dst) for src, dst in slow if src not in named and dst not in named)
    return {"nodes": named, "links": links, "ambiguous": False}


def transfer_bytes(probe_gbytes_s: float, nbytes: int, cap_s: float) -> int:
    """A link's timed transfer: `nbytes`, or what its probe's rate moves in `cap_s` where
    that is less (never below the probe's own size)."""
    probe = min(PROBE_BYTES, nbytes)
    return int(max(probe, min(nbytes, probe_gbytes_s * 1e9 * cap_s)))


# ---- the measurement (one rank per node; every rank of the job takes part in the barriers) --
def _exchange(td, send, recv, ranks: tuple[int, int], sizes: tuple, device: str) -> float:
    """One round's transfer: send sizes[0] bytes to rank `to` while receiving sizes[1] from
    `frm` (ranks: (to, frm)) -> the seconds until the receive completed."""
    import torch
    to, frm = ranks
    t0 = time.perf_counter()
    reqs = td.batch_isend_irecv([td.P2POp(td.isend, send[:sizes[0]], to),
                                 td.P2POp(td.irecv, recv[:sizes[1]], frm)])
    reqs[1].wait()
    if device != "cpu":
        torch.cuda.synchronize()
    took = time.perf_counter() - t0
    reqs[0].wait()
    return took


def measure(dist, gpus_per_node: int, nbytes: int, iters: int, device: str = "cpu",
            cap_s: float | None = None) -> list:
    """Run the schedule over the job's node leaders (rank node * gpus_per_node) -> for
    this rank, [{src, dst, stride, bytes, seconds, capped, probe_gbytes_s}] of the links it
    received on (empty on a rank that leads no node): the best of `iters` transfers, so that
    a late start of one (a barrier left a moment later) is not taken for a slow link.

    Each round opens its connections with 1 KiB, then times a probe (PROBE_BYTES); the
    probes' rates are summed over every rank (each leader adds the one it received), so a
    link's two ends agree on its transfer's size (`transfer_bytes`, capped to `cap_s`)."""
    import torch
    import torch.distributed as td

    nodes = dist.world_size // gpus_per_node
    me = dist.rank // gpus_per_node if dist.rank % gpus_per_node == 0 else None
    send = torch.ones(nbytes, dtype=torch.uint8, device=device) if me is not None else None
    recv = torch.empty(nbytes, dtype=torch.uint8, device=device) if me is not None else None
    probe = min(PROBE_BYTES, nbytes)
    out = []
    for stride, _ in schedule(nodes):
        to, frm = partners(me, nodes, stride) if me is not None else (None, None)
        # ranks, took, sizes: None on a rank that leads no node, which only joins the collectives
        # (their every use is under `me is not None`, which mypy does not carry across)
        ranks: Any = (to * gpus_per_node, frm * gpus_per_node) if me is not None else None
        took: Any = None
        for size in (1024, probe):  # open the pair's connection, then the probe
            td.barrier()
            took = _exchange(td, send, recv, ranks, (size, size), device) if me is not None else None
        rates = torch.zeros(nodes, dtype=torch.float64, device=device)
        if me is not None:
            rates[me] = probe / took / 1e9  # the link into me
        td.all_reduce(rates)
        speeds = rates.tolist()
        sizes: Any = ((transfer_bytes(speeds[to], nbytes, cap_s or float("inf")),
                       transfer_bytes(speeds[me], nbytes, cap_s or float("inf"))) if me is not None else None)
        best = None
        for _ in range(iters):
            td.barrier()
            if me is not None:
                took = _exchange(td, send, recv, ranks, sizes, device)
                best = took if best is None else min(best, took)
        td.barrier()
        if me is not None:
            out.append({"src": frm, "dst": me, "stride": stride, "bytes": sizes[1], "seconds": best,
                        "capped": sizes[1] < nbytes, "probe_gbytes_s": speeds[me]})
    return out
