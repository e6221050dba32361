"""PyTorch collectives by the nccl-tests method (bench=comm): CommSession, whose
`run_bench` replaces the harness's training loop (docs/comm.md).

Per op, per message size (min_bytes to max_bytes by `factor`) and per in-place /
out-of-place variant: `warmup_iters` untimed iterations, a device sync and a
barrier, `iters` timed iterations with a device sync only after the last, then
one more run on freshly filled inputs whose output is checked element by element
against the value computed from the known per-rank inputs. Each measurement goes
to `record["comm"]`; the formulas are contract/busbw.py. gloo on CPU,
NCCL on GPUs. Standard library and torch only.

The checks run after every op of every size, so that all ranks take part in every
collective; only then does a rank fail, for wrong elements or for an op's average
bus bandwidth below `min_busbw`.

all_to_allv is the uneven all-to-all of a mixture of experts' token dispatch: every rank
sends its buffer split between the ranks by their experts' share of a skewed routing
(contract/busbw.py: `a2a_experts` experts, Zipf `a2a_skew`, or `a2a_load`, the tokens per
expert a training run recorded), so the ranks holding hot experts receive more.
"""
import time
from typing import Any

import torch
import torch.distributed as torch_dist

from contract import busbw, values
from frameworks.pytorch.session import TorchSession, setup_device

DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int32": torch.int32, "int64": torch.int64}
IN_PLACE_ONLY = ("all_reduce", "broadcast", "reduce")  # torch.distributed has no out-of-place form
REDUCING = ("all_reduce", "reduce", "reduce_scatter")
DEFAULTS = {"ops": list(busbw.OPS), "min_bytes": 1 << 20, "max_bytes": 1 << 30, "factor": 2,
            "dtype": "float32", "warmup_iters": 5, "iters": 20, "inplace": [False, True],
            "check": True, "min_busbw": None, "root": 0, "corrupt_rank": None,
            "a2a_experts": 256, "a2a_skew": 1.0, "a2a_load": None, "a2a_seed": 0}
CHECK_CHUNK = 1 << 24  # elements compared at a time, to bound the check's extra memory


class CommCheckFailed(RuntimeError):
    """Wrong elements in a result, or bus bandwidth under the health gate."""


def options(spec, world_size: int) -> dict:
    """The bench options of the spec, defaulted and validated (one clear line when bad)."""
    opts: dict[str, Any] = dict(DEFAULTS)
    opts.update({k: v for k, v in spec.bench_options.items() if k != "name"})
    ops = [opts["ops"]] if isinstance(opts["ops"], str) else list(opts["ops"])
    bad = [op for op in ops if op not in busbw.OPS]
    if bad or not ops:
        raise ValueError(f"bench.ops: unknown or no collective {bad} (valid: {', '.join(busbw.OPS)})")
    opts["ops"] = ops
    opts["sizes"] = busbw.sizes(opts["min_bytes"], opts["max_bytes"], opts["factor"])
    if opts["dtype"] not in DTYPES:
        raise ValueError(f"bench.dtype must be one of {', '.join(DTYPES)}, got {opts['dtype']!r}")
    values.integer(opts["warmup_iters"], "bench.warmup_iters", 0)
    values.integer(opts["iters"], "bench.iters", 1)
    inplace = opts["inplace"]
    inplace = [inplace] if isinstance(inplace, bool) else list(inplace)
    if not inplace or any(not isinstance(v, bool) for v in inplace):
        raise ValueError(f"bench.inplace must be true, false or a list of them, got {opts['inplace']!r}")
    opts["inplace"] = sorted(set(inplace))  # out-of-place first, as nccl-tests prints them
    if opts["min_busbw"] is not None and not values.is_number(opts["min_busbw"]):
        raise ValueError(f"bench.min_busbw must be a number of GB/s or null, got {opts['min_busbw']!r}")
    if opts["min_busbw"] is not None and not busbw.moves(world_size):
        raise ValueError(f"bench.min_busbw needs two ranks or more: a collective of {world_size} rank "
                         "moves nothing, so it has no bandwidth to judge")
    if not values.is_integer(opts["root"]) or not 0 <= opts["root"] < world_size:
        raise ValueError(f"bench.root must be a rank below {world_size}, got {opts['root']!r}")
    c = opts["corrupt_rank"]
    if c is not None and not values.is_integer(c):
        raise ValueError(f"bench.corrupt_rank must be a rank or null, got {c!r}")
    opts["shares"] = dispatch_shares(opts, world_size)
    return opts


def dispatch_shares(opts, world_size: int) -> list:
    """Each rank's share of all_to_allv's buffer (contract/busbw.py): from recorded loads
    `a2a_load` where given (a list of tokens per expert, or a training rank record's path:
    its moe.tokens_per_expert, summed over its layers), else a Zipf routing."""
    load = opts["a2a_load"]
    try:
        if isinstance(load, str):
            load = recorded_load(load)
        if load is not None:
            if not hasattr(load, "__iter__"):
                raise ValueError(f"a list of tokens per expert, got {load!r}")
            return busbw.rank_shares(list(load), world_size)
        return busbw.rank_shares(busbw.expert_loads(opts["a2a_experts"], opts["a2a_skew"],
                                                     opts["a2a_seed"]), world_size)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"bench.a2a_load / a2a_experts / a2a_skew: {exc}") from None


def recorded_load(path: str) -> list:
    """Tokens per expert a training run recorded (a rank record's moe.tokens_per_expert,
    the timed steps' counts of each MoE layer), summed over its layers."""
    import json
    try:
        with open(path) as f:
            layers = (json.load(f).get("moe") or {}).get("tokens_per_expert")
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read a rank record at {path!r}: {exc}") from None
    if not layers:
        raise ValueError(f"{path} records no tokens per expert (not a mixture of experts' rank record)")
    return [sum(col) for col in zip(*layers)]


# ---- known inputs and the results they must give ----------------------------------------

def pattern(rank: int, idx: torch.Tensor) -> torch.Tensor:
    """Rank `rank`'s input at element indices idx (int64): small integers, so that sums
    over many ranks stay exact in float32 and close in the 16-bit types."""
    return 1 + (rank % 11) + idx % 13


def _rank_sum(nranks: int) -> int:
    return sum(1 + (j % 11) for j in range(nranks))


def expected(op: str, rank: int, nranks: int, count: int, idx: torch.Tensor, root: int = 0,
             shares=None):
    """The correct output of `op` on `rank` at output indices idx (int64), for inputs
    made by `pattern`, `count` being the op's element count (all_to_allv's split by
    `shares`, even where None); None where the output is undefined (reduce, on a rank
    other than the root)."""
    per = count // nranks
    if op == "all_to_allv":   # from each sender in turn, its segment for this rank
        splits = busbw.uneven_splits(count, shares or [1 / nranks] * nranks)
        mine, offset = max(splits[rank], 1), sum(splits[:rank])   # max: none may come
        return 1 + (idx // mine) % 11 + (offset + idx % mine) % 13
    if op == "all_reduce":
        return _rank_sum(nranks) + nranks * (idx % 13)
    if op == "reduce":
        return _rank_sum(nranks) + nranks * (idx % 13) if rank == root else None
    if op == "broadcast":
        return pattern(root, idx)
    if op == "all_gather":  # chunk j of the output is rank j's input
        return pattern(0, idx % per) + (idx // per) % 11
    if op == "reduce_scatter":  # this rank's chunk of the sum
        return _rank_sum(nranks) + nranks * ((rank * per + idx) % 13)
    if op == "all_to_all":  # chunk j of the output is chunk `rank` of rank j's input
        return pattern(0, rank * per + idx % per) + (idx // per) % 11
    raise ValueError(f"unknown collective {op!r}")


def count_wrong(actual: torch.Tensor, want: torch.Tensor, nranks: int, reduced: bool = True) -> int:
    """Elements of `actual` that differ from the exact `want`: exactly for integers and for
    data only moved; for a float reduction, beyond the rounding of summing nranks terms
    ((nranks-1) half-units in the last place of the type, relative)."""
    if actual.dtype.is_floating_point and reduced:
        tol = max(nranks - 1, 1) * torch.finfo(actual.dtype).eps / 2
        bad = ~torch.isclose(actual.double(), want.double(), rtol=tol, atol=0.0)
    else:
        bad = actual != want.to(actual.dtype)
    return int(bad.sum().item())


def wrong_elements(op, out, rank, nranks, count, root=0, shares=None) -> int:
    """Wrong elements of one op's output tensor, compared chunk by chunk."""
    total = 0
    for start in range(0, out.numel(), CHECK_CHUNK):
        stop = min(start + CHECK_CHUNK, out.numel())
        idx = torch.arange(start, stop, device=out.device, dtype=torch.int64)
        want = expected(op, rank, nranks, count, idx, root, shares)
        if want is None:
            return 0
        total += count_wrong(out[start:stop], want, nranks, op in REDUCING)
    return total


def fill(t: torch.Tensor, rank: int) -> None:
    """Write rank's known input into t, chunk by chunk."""
    for start in range(0, t.numel(), CHECK_CHUNK):
        stop = min(start + CHECK_CHUNK, t.numel())
        t[start:stop].copy_(pattern(rank, torch.arange(start, stop, device=t.device)))


# ---- the collectives ---------------------------------------------------------------------

_all_gather = getattr(torch_dist, "all_gather_single", None) or torch_dist.all_gather_into_tensor
_reduce_scatter = getattr(torch_dist, "reduce_scatter_single", None) or torch_dist.reduce_scatter_tensor


class Buffers:
    """One op's buffers, allocated once at the largest size; each size uses their front.
    all_to_allv's receive buffer holds what this rank receives at the largest size."""

    def __init__(self, op, max_count, dtype, device, shares=None, rank=0):
        self.op, self.shares = op, shares
        alloc = lambda n: torch.empty(n, dtype=dtype, device=device)  # noqa: E731
        self.send = alloc(max_count)
        self.recv = alloc(max_count) if op in busbw.CHUNKED else None
        if op == "all_to_allv":
            self.recv = alloc(len(shares) * busbw.uneven_splits(max_count, shares)[rank])

    def call(self, count, inplace, rank, nranks, root):
        """(the op as a no-argument call, prepare its input, its output tensor)."""
        op, per = self.op, count // nranks
        if op in IN_PLACE_ONLY:
            t = self.send[:count]
            fn = {"all_reduce": lambda: torch_dist.all_reduce(t),
                  "broadcast": lambda: torch_dist.broadcast(t, src=root),
                  "reduce": lambda: torch_dist.reduce(t, dst=root)}[op]
            return fn, lambda: fill(t, rank), t
        if op == "all_gather":
            out = self.recv[:count]
            inp = out[rank * per:(rank + 1) * per] if inplace else self.send[:per]
            return lambda: _all_gather(out, inp), lambda: fill(inp, rank), out
        if op == "reduce_scatter":
            inp = self.send[:count]
            out = inp[rank * per:(rank + 1) * per] if inplace else self.recv[:per]
            return lambda: _reduce_scatter(out, inp), lambda: fill(inp, rank), out
        if op == "all_to_all":
            if inplace:
                raise ValueError("all_to_all has no in-place form")
            inp, out = self.send[:count], self.recv[:count]
            return lambda: torch_dist.all_to_all_single(out, inp), lambda: fill(inp, rank), out
        if op == "all_to_allv":   # every sender splits alike: this rank gets splits[rank] from each
            splits = busbw.uneven_splits(count, self.shares)
            inp, out = self.send[:count], self.recv[:nranks * splits[rank]]
            return (lambda: torch_dist.all_to_all_single(out, inp, [splits[rank]] * nranks, splits),
                    lambda: fill(inp, rank), out)
        raise ValueError(f"unknown collective {op!r}")


def variants(op, inplace_opts):
    """The in-place settings an op runs with: torch has only one form of some ops."""
    if op in IN_PLACE_ONLY:
        return [True]
    if op in ("all_to_all", "all_to_allv"):
        return [False]
    return inplace_opts


# ---- the session -------------------------------------------------------------------------

class CommSession(TorchSession):
    """TorchSession's sync, barrier, environment, memory and close; no model."""

    def __init__(self, spec, dist):  # no super().__init__: it would build a model
        self.dist = dist
        self.opts = options(spec, dist.world_size)
        # a process group even for one rank: collectives need one
        self.device, self.cuda = setup_device(spec, dist, group=True)
        self.dtype = DTYPES[self.opts["dtype"]]

    def barrier(self):
        torch_dist.barrier()

    def environment(self):
        env = super().environment()
        env["backend"] = torch_dist.get_backend()
        return env

    def step(self):
        raise NotImplementedError("bench=comm measures collectives, not training steps")

    def measure(self, call, warmup, iters) -> float:
        """Seconds per iteration: warm-up, sync and barrier, timed iterations, sync."""
        for _ in range(warmup):
            call()
        self.sync()
        self.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            call()
        self.sync()
        return (time.perf_counter() - t0) / iters

    def run_bench(self, spec, record, origin):
        o, rank, n = self.opts, self.dist.rank, self.dist.world_size
        elsize = torch.empty((), dtype=self.dtype).element_size()
        results = record["comm"] = []
        say = print if rank == 0 else (lambda *a, **k: None)
        say(f"# comm: {n} ranks, {self.device}, {torch_dist.get_backend()}, {o['dtype']}, "
            f"{o['warmup_iters']} warm-up + {o['iters']} timed iterations")
        say(f"# {'op':>14} {'size':>12} {'count':>12} {'place':>5} {'time(us)':>10} "
            f"{'algbw':>8} {'busbw':>8} {'#wrong':>6}", flush=True)
        self.sync()
        self.barrier()
        w0 = time.perf_counter()
        for op in o["ops"]:
            counts = [(s, busbw.element_count(op, s, elsize, n)) for s in o["sizes"]]
            counts = [(s, c) for s, c in counts if c > 0]  # too small for one element per rank
            if not counts:
                continue
            bufs = Buffers(op, max(c for _, c in counts), self.dtype, self.device, o["shares"], rank)
            for _, count in counts:
                nbytes = count * elsize
                for inplace in variants(op, o["inplace"]):
                    call, prepare, out = bufs.call(count, inplace, rank, n, o["root"])
                    prepare()
                    secs = self.measure(call, o["warmup_iters"], o["iters"])
                    wrong = None
                    if o["check"]:
                        prepare()
                        call()
                        self.sync()
                        if rank == o["corrupt_rank"]:
                            out[:3] = -out[:3] - 1  # on purpose (tests): far from any right value
                        wrong = wrong_elements(op, out, rank, n, count, o["root"], o["shares"])
                    moves = busbw.moves(n)   # one rank: its time only, no bandwidth
                    row = {"op": op, "bytes": nbytes, "count": count, "dtype": o["dtype"],
                           "inplace": inplace, "iters": o["iters"], "time_s": secs,
                           "algbw_gbps": busbw.algbw_gbps(nbytes, secs) if moves else None,
                           "busbw_gbps": busbw.busbw_gbps(op, nbytes, secs, n) if moves else None,
                           "wrong": wrong}
                    if op == "all_to_allv":   # the largest rank's received bytes over the mean's
                        row["imbalance"] = busbw.receive_imbalance(count, o["shares"])
                    results.append(row)
                    say(f"  {op:>14} {nbytes:>12} {count:>12} {'in' if inplace else 'out':>5} "
                        f"{secs * 1e6:>10.1f} {_gbps(row['algbw_gbps'])} {_gbps(row['busbw_gbps'])} "
                        f"{'n/a' if wrong is None else wrong:>6}", flush=True)
            del bufs, call, prepare, out
        self.sync()
        record["window"] = {"start": w0 - origin, "end": time.perf_counter() - origin}
        if not results:
            raise CommCheckFailed(f"no measurement: no size from {o['sizes'][0]} to {o['sizes'][-1]} "
                                  f"bytes holds one {o['dtype']} element per rank")
        problems = gate(results, o["min_busbw"])
        for op in o["ops"]:
            vals = [r["busbw_gbps"] for r in results if r["op"] == op and r["busbw_gbps"] is not None]
            if vals:
                say(f"# {op}: Avg bus bandwidth {busbw.avg_busbw(vals):.3f} GB/s", flush=True)
        if not busbw.moves(n):
            say(f"# {n} rank: a collective moves nothing; times only, no bandwidth", flush=True)
        if problems:
            raise CommCheckFailed("; ".join(problems))


def _gbps(value) -> str:
    return f"{'n/a':>8}" if value is None else f"{value:>8.3f}"


def gate(results, min_busbw) -> list:
    """The reasons a rank fails: wrong elements, or an op's average bus bandwidth (mean over
    its sizes, in- and out-of-place, as nccl-tests' "Avg bus bandwidth") below min_busbw."""
    problems = []
    wrong = [r for r in results if r["wrong"]]
    if wrong:
        first = wrong[0]
        problems.append(
            f"{sum(r['wrong'] for r in wrong)} wrong elements in {len(wrong)} result(s), first "
            f"{first['wrong']} in {first['op']} at {first['bytes']} bytes "
            f"({'in' if first['inplace'] else 'out-of'}-place)")
    if min_busbw is not None:
        for op in dict.fromkeys(r["op"] for r in results):
            rows = [r for r in results if r["op"] == op]
            avg = busbw.avg_busbw(r["busbw_gbps"] for r in rows)
            if avg < min_busbw:
                problems.append(
                    f"average bus bandwidth {avg:.3g} GB/s below min_busbw {min_busbw} for {op} "
                    f"(mean over {len(rows)} measurements, {rows[0]['bytes']} to "
                    f"{rows[-1]['bytes']} bytes)")
    return problems

