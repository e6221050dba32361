"""The arithmetic of the collective benchmarks (bench=comm), written once: message
sizes, element counts, algorithm and bus bandwidth, as nccl-tests defines them
(nccl-tests/doc/PERFORMANCE.md). The worker (frameworks/<name>/comm.py) and the
analysis (analysis/figures/comm.py) both import it. Standard library only: this runs in
the framework's Python.

- Size S of a measurement: the bytes of the op's whole buffer, as nccl-tests'
  `size` column: the reduced or broadcast buffer; for all_gather the gathered
  output, for reduce_scatter the input that is scattered, for all_to_all each
  rank's send (= receive) buffer; for all_to_allv (the uneven all-to-all of a
  mixture of experts' token dispatch) each rank's send buffer too, split between
  the ranks as a skewed routing splits tokens between their experts
  (`expert_loads`, `rank_shares`, `uneven_splits`), so that a rank receives
  more or less than it sends.
- Algorithm bandwidth: algbw = S / t, in GB/s = 1e9 bytes/s, t = average time
  of one iteration.
- Bus bandwidth: busbw = algbw * factor, the factor making the figure comparable
  to the hardware's link bandwidth whatever the rank count n:
      all_reduce                            2(n-1)/n
      reduce_scatter, all_gather, all_to_all (n-1)/n
      all_to_allv                           (n-1)/n, all_to_all's: the figure the
                                            even all-to-all of the same bytes
                                            would show in the same time
      broadcast, reduce                     1
- One rank moves nothing: a collective among fewer than two ranks copies (or leaves) its
  buffer in place, and no bandwidth of it is shown anywhere (`moves`; nccl-tests' bus
  bandwidth is 0 there, its algbw the speed of a local copy): the worker records none, the
  analysis and the report show none, and min_busbw cannot judge it.
- A run's "Avg bus bandwidth" of one op: the mean of busbw over every
  measurement of that op (all sizes, in-place and out-of-place), as nccl-tests
  prints it; the min_busbw health gate compares that figure.
"""
import random
import re
import statistics
from collections.abc import Iterable, Sequence

OPS = ("all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "all_to_all",
       "all_to_allv")
# Ops whose buffer is split into one chunk per rank: their element count must
# divide by the number of ranks.
CHUNKED = ("all_gather", "reduce_scatter", "all_to_all")
GB = 1e9  # nccl-tests' GB/s are 1e9 bytes/s
_UNITS = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4}  # as nccl-tests' -b/-e


def moves(nranks: int) -> bool:
    """Whether a collective among `nranks` ranks moves data between them (two or more): a
    bandwidth of one rank's collective would be a local copy's, or 0, and is never shown."""
    return nranks >= 2


def bus_factor(op: str, nranks: int) -> float:
    """nccl-tests' factor from algorithm to bus bandwidth for `op` on `nranks` ranks."""
    if nranks < 1:
        raise ValueError(f"nranks must be >= 1, got {nranks}")
    if op == "all_reduce":
        return 2 * (nranks - 1) / nranks
    if op in CHUNKED or op == "all_to_allv":
        return (nranks - 1) / nranks
    if op in ("broadcast", "reduce"):
        return 1.0
    raise ValueError(f"unknown collective {op!r} (valid: {', '.join(OPS)})")


def algbw_gbps(nbytes: int, seconds: float) -> float:
    """Algorithm bandwidth in GB/s: the op's size S over the time of one iteration."""
    if seconds <= 0:
        raise ValueError(f"time must be positive, got {seconds}")
    return nbytes / seconds / GB


def busbw_gbps(op: str, nbytes: int, seconds: float, nranks: int) -> float:
    """Bus bandwidth in GB/s: algbw times the op's factor for nranks."""
    return algbw_gbps(nbytes, seconds) * bus_factor(op, nranks)


def avg_busbw(values: Iterable[float]) -> float:
    """nccl-tests' "Avg bus bandwidth": the plain mean over an op's measurements."""
    measured = list(values)
    if not measured:
        raise ValueError("no measurements to average")
    return statistics.fmean(measured)


def parse_bytes(value: object) -> int:
    """An int, or a string like 1048576, "64K", "1M", "1G" (powers of 1024, as nccl-tests)."""
    if isinstance(value, bool):
        raise ValueError(f"not a byte size: {value!r}")
    if isinstance(value, int):
        return value
    m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)i?B?\s*", str(value), re.IGNORECASE)
    if not m:
        raise ValueError(f"not a byte size: {value!r} (an integer, or e.g. 64K, 1M, 1G)")
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


def sizes(min_bytes: object, max_bytes: object, factor: int = 2) -> list[int]:
    """Message sizes from min to max (inclusive when reached), each `factor` times the last."""
    lo, hi = parse_bytes(min_bytes), parse_bytes(max_bytes)
    if not isinstance(factor, int) or isinstance(factor, bool) or factor < 2:
        raise ValueError(f"factor must be an integer >= 2, got {factor!r}")
    if lo < 1 or hi < lo:
        raise ValueError(f"need 1 <= min_bytes <= max_bytes, got {lo} and {hi}")
    out: list[int] = []
    size = lo
    while size <= hi:
        out.append(size)
        size *= factor
    return out


def element_count(op: str, nbytes: int, element_size: int, nranks: int) -> int:
    """Elements of an op's S-byte buffer: whole elements and, for a chunked op, whole
    per-rank chunks (rounded down, as nccl-tests does), so the bytes measured are
    element_count * element_size <= nbytes. 0 when S is too small for one element per rank."""
    count = nbytes // element_size
    if op in CHUNKED:
        count -= count % nranks
    return count


# ---- the uneven all-to-all (all_to_allv): a mixture of experts' token dispatch -------------
def expert_loads(experts: int, skew: float, seed: int = 0) -> list[float]:
    """Relative tokens per expert of a skewed routing, by Zipf's law: the expert of
    popularity rank i gets (i + 1)^-skew (skew 0: all equal), the popularity ranks dealt to
    the experts in an order drawn from `seed`, so that the hot experts sit on any rank."""
    if not isinstance(experts, int) or isinstance(experts, bool) or experts < 1:
        raise ValueError(f"experts must be an integer >= 1, got {experts!r}")
    if not isinstance(skew, (int, float)) or isinstance(skew, bool) or skew < 0:
        raise ValueError(f"skew must be a number >= 0, got {skew!r}")
    order = list(range(experts))
    random.Random(seed).shuffle(order)
    loads = [0.0] * experts
    for popularity, expert in enumerate(order):
        loads[expert] = (popularity + 1) ** -float(skew)
    return loads


def rank_shares(loads: Iterable[float], nranks: int) -> list[float]:
    """Each rank's share of the routed tokens: the experts in nranks contiguous blocks (expert
    e on rank e x nranks // experts, the split of expert parallelism), their loads summed,
    normalised. A training run's recorded tokens per expert are loads too."""
    given = [float(v) for v in loads]
    if not given or any(v < 0 for v in given) or sum(given) <= 0:
        raise ValueError(f"expert loads must be numbers >= 0, not all 0, got {given!r}")
    shares = [0.0] * nranks
    for e, load in enumerate(given):
        shares[e * nranks // len(given)] += load
    total = sum(shares)
    return [v / total for v in shares]


def uneven_splits(count: int, shares: Sequence[float]) -> list[int]:
    """`count` elements apportioned by `shares` (largest remainder): whole elements that
    add up to count exactly; every sender splits its buffer this way."""
    exact = [count * s for s in shares]
    splits = [int(v) for v in exact]
    for j in sorted(range(len(shares)), key=lambda j: splits[j] - exact[j])[:count - sum(splits)]:
        splits[j] += 1
    return splits


def receive_imbalance(count: int, shares: Sequence[float]) -> float:
    """The largest rank's received bytes over the mean's (1.0: even), for an all_to_allv of
    `count` elements per sender split by `shares`."""
    splits = uneven_splits(count, shares)
    return max(splits) * len(splits) / count if count else 1.0
