"""A mixture of experts' layer for the CPU layouts: torchtitan's MoE (torchtitan/models/common/
moe.py) in plain torch, and its token dispatch to experts split over ep ranks by all-to-all
with uneven splits (its AllToAllTokenDispatcher), timed.

- Routing (torchtitan's TokenChoiceTopKRouter): scores = softmax or sigmoid of a linear gate
  (with a bias where `gate_bias`), in fp32; the expert bias is added for the choice only;
  node-limited routing keeps the `limited_groups` best of `expert_groups` groups (a group's
  score: its two best experts);
  the top-k scores, renormalised where `route_norm`, times `route_scale`, weight the experts'
  outputs. No capacity: no token is ever dropped.
- Routed experts: SwiGLU experts stacked as (experts, ...) weights, run one after another on
  their tokens (torchtitan's grouped GEMM, torch._grouped_mm, has no backward on the CPU in
  torch 2.13); a family whose experts differ (biases, another activation) gives its own
  `Experts` subclass (`experts_class`): its weights and how tensor parallelism splits each
  (`SPLIT`), one expert's output (`expert`). Shared experts: one SwiGLU every token passes
  through.
- Load balancing without an auxiliary loss (DeepSeek-V3; Wang et al. 2024, arXiv 2408.15664),
  as torchtitan's optimizer pre-hook does it: before each optimizer step the expert bias moves
  by coeff x sign(mean load - load), centred, from the iteration's tokens per expert summed
  over every rank that routed some of them (`balance`).
- Expert parallelism (frameworks/pytorch/layouts/expert_parallel.py sets it up): a rank holds experts
  [ep_i x E / ep, (ep_i + 1) x E / ep); it sorts its (token, choice) pairs by expert, tells
  each rank of its expert group how many it sends to each of its experts (an all-to-all of
  counts), sends the tokens (an all-to-all of uneven splits), runs its experts on what it got,
  and sends the outputs back the same way; the backward sends gradients the opposite way.
  Each all-to-all's seconds are added to the layer's `clock` (`Clock`: the host's on the CPU,
  CUDA events on a GPU).
- With tensor parallelism and ep = 1 the experts' hidden width is split over tp (torchtitan's
  expert TP) and their outputs summed; with ep > 1 each tp rank routes its part of the
  sequence (torchtitan's), the parts gathered after the combine. The helpers at the end move
  a tensor between those placements with DTensor, whose backward is the matching collective.
"""
import contextlib
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard

from frameworks.pytorch.layouts.sharded_embedding import ScaleGrad


class Clock:
    """Seconds spent in a layer's all-to-alls (dispatch and combine, forward and backward): on
    the host clock where a collective returns when done (gloo), by CUDA events on the current
    stream on a GPU, where NCCL's returns once queued and the stream waits for it; the events
    are read at `take`, once a step."""

    def __init__(self):
        self.seconds, self.events = 0.0, []

    @contextlib.contextmanager
    def timing(self, device):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            yield
            end.record()
            self.events.append((start, end))
            return
        t0 = time.perf_counter()
        yield
        self.seconds += time.perf_counter() - t0

    def take(self) -> float:
        for start, end in self.events:
            end.synchronize()
            self.seconds += start.elapsed_time(end) / 1e3
        seconds, self.seconds, self.events = self.seconds, 0.0, []
        return seconds


def exchange(x, out_splits, in_splits, group, clock) -> torch.Tensor:
    """All-to-all of rows: in_splits[j] rows of x to rank j of `group`, out_splits[j] from it."""
    out = x.new_empty((sum(out_splits),) + tuple(x.shape[1:]))
    with clock.timing(x.device):
        dist.all_to_all_single(out, x.contiguous(), out_splits, in_splits, group=group)
    return out


class AllToAll(torch.autograd.Function):
    """`exchange` whose backward sends the gradients back the way the rows came."""

    @staticmethod
    def forward(ctx, x, out_splits, in_splits, group, clock):
        ctx.splits, ctx.group, ctx.clock = (out_splits, in_splits), group, clock
        return exchange(x, out_splits, in_splits, group, clock)

    @staticmethod
    def backward(ctx, grad):
        out_splits, in_splits = ctx.splits
        return exchange(grad, in_splits, out_splits, ctx.group, ctx.clock), None, None, None, None


class Router(nn.Module):
    """Token-choice top-k routing (module docstring): (scores, experts), each (tokens, top_k)."""

    def __init__(self, hidden, experts, top_k, score_func, expert_groups, limited_groups,
                 route_scale, route_norm, gate_bias=False):
        super().__init__()
        self.gate = nn.Linear(hidden, experts, bias=gate_bias)
        self.experts, self.top_k, self.score_func = experts, top_k, score_func
        self.expert_groups, self.limited_groups = expert_groups, limited_groups
        self.route_scale, self.route_norm = route_scale, route_norm

    def forward(self, x, bias):
        with torch.autocast(x.device.type, enabled=False):   # fp32, as torchtitan's gate
            logits = self.gate(x.float())
        scores = torch.sigmoid(logits) if self.score_func == "sigmoid" else F.softmax(logits, dim=-1)
        scores = scores.reshape(-1, self.experts)
        choice = scores + bias if bias is not None else scores
        if self.expert_groups:
            grouped = choice.unflatten(-1, (self.expert_groups, -1))
            best = grouped.topk(2, dim=-1)[0].sum(dim=-1).topk(self.limited_groups, dim=-1)[1]
            dropped = torch.ones_like(grouped[..., 0], dtype=torch.bool).scatter_(-1, best, False)
            choice = grouped.masked_fill(dropped[..., None], float("-inf")).flatten(-2)
        experts = torch.topk(choice, self.top_k, dim=-1, sorted=False)[1]
        top = scores.gather(-1, experts)
        if self.route_norm:
            top = top / (top.sum(dim=-1, keepdim=True) + 1e-20)
        return top * self.route_scale, experts


class Experts(nn.Module):
    """SwiGLU experts, w2(silu(w1 x) * w3 x) each, their weights stacked; a rank of an expert
    group holds `ids` of them (all without expert parallelism). `SPLIT`: each weight, in the
    order `expert` takes them, and the dim tensor parallelism splits (torchtitan's expert TP:
    the hidden width; None: replicated), read by frameworks/pytorch/layouts/expert_parallel.py.
    `grad_scale`: what the weights' gradients are multiplied by (expert_parallel.py's
    wrap_experts says why)."""

    SPLIT: dict[str, int | None] = {"w1": 1, "w2": 2, "w3": 1}  # None: a bias tp replicates

    def __init__(self, experts, hidden, moe_hidden):
        super().__init__()
        self.ids, self.grad_scale = range(experts), 1.0
        self.w1 = nn.Parameter(torch.empty(experts, moe_hidden, hidden))
        self.w2 = nn.Parameter(torch.empty(experts, hidden, moe_hidden))
        self.w3 = nn.Parameter(torch.empty(experts, moe_hidden, hidden))

    def weights(self) -> list:
        """This rank's parts of the weights (SPLIT's order), their gradients scaled."""
        weights = [local(getattr(self, name)) for name in self.SPLIT]
        if self.grad_scale != 1.0:
            weights = [ScaleGrad.apply(w, self.grad_scale) for w in weights]
        return weights

    @staticmethod
    def expert(rows, w1, w2, w3):
        """One expert's output of its rows."""
        return (F.silu(rows @ w1.t()) * (rows @ w3.t())) @ w2.t()

    def forward(self, x, counts):
        """x: rows sorted by expert, counts[e] of them for this rank's e-th expert. Every
        expert runs, on no row if none came, so each weight has a gradient on every rank."""
        weights = self.weights()
        out, start = [], 0
        for e, n in enumerate(counts):
            rows = x[start:start + n]
            start += n
            out.append(self.expert(rows, *(w[e] for w in weights)))
        return torch.cat(out)


class MoE(nn.Module):
    """The MoE feed-forward of a layer (module docstring); `feed_forward`: the family's SwiGLU,
    the shared experts' module; `experts_class`: the routed experts' (Experts or a family's)."""

    def __init__(self, hidden, moe_hidden, experts, shared_experts, top_k, score_func, feed_forward,
                 expert_groups=None, limited_groups=None, route_scale=1.0, route_norm=False,
                 load_balance_coeff=1e-3, gate_bias=False, experts_class=Experts):
        super().__init__()
        self.router = Router(hidden, experts, top_k, score_func, expert_groups, limited_groups,
                             route_scale, route_norm, gate_bias)
        self.experts = experts_class(experts, hidden, moe_hidden)
        self.shared_experts = feed_forward(hidden, moe_hidden * shared_experts) if shared_experts else None
        self.load_balance_coeff, self.top_k, self.count = load_balance_coeff, top_k, experts
        self.register_buffer("expert_bias", torch.zeros(experts))
        self.register_buffer("tokens_per_expert", torch.zeros(experts))   # this iteration's, this rank's
        # set by frameworks/pytorch/layouts/expert_parallel.py: the expert group, the tp mesh and
        # whether the tp ranks split the sequence between them (ep > 1)
        self.ep, self.ep_group, self.tp_mesh, self.split = 1, None, None, False
        self.clock = Clock()

    def reset_buffers(self):
        self.expert_bias.zero_()
        self.tokens_per_expert.zero_()

    def forward(self, x):
        b, d = x.shape[0], x.shape[-1]
        mine = shard_sequence(x, self.tp_mesh) if self.split else x   # this tp rank's part of the sequence
        scores, chosen = self.router(mine, self.expert_bias)
        if self.tp_mesh is not None and not self.split:
            # every tp rank routes every token to its part of each expert's width: a part
            # of the gradient of the tokens and of their scores each
            mine, scores = sum_grad(x, self.tp_mesh), sum_grad(scores, self.tp_mesh)
        counts = torch.bincount(chosen.flatten(), minlength=self.count)
        if self.training:
            with torch.no_grad():
                self.tokens_per_expert += counts
        tokens = mine.reshape(-1, d)
        order = torch.argsort(chosen.flatten(), stable=True)
        token_of = order // self.top_k
        y = self._routed(tokens[token_of], counts)
        y = (y.float() * scores.flatten()[order, None]).to(y.dtype)
        out = y.new_zeros(tokens.shape[0], d).index_add(0, token_of, y).view(b, -1, d)
        if self.split:
            out = gather_sequence(out, self.tp_mesh)
        elif self.tp_mesh is not None:
            out = reduce_partial(out, self.tp_mesh)
        if self.shared_experts is not None:
            out = out + self.shared_experts(x)
        return out

    def _routed(self, rows, counts):
        """The experts' outputs of `rows` (sorted by expert), in the same order."""
        if self.ep == 1:
            return self.experts(rows, counts.tolist())
        sent = counts.view(self.ep, -1)                   # to rank j: its experts' rows
        got = torch.empty_like(sent)
        dist.all_to_all_single(got, sent, group=self.ep_group)
        in_splits, out_splits = sent.sum(1).tolist(), got.sum(1).tolist()
        received = AllToAll.apply(rows, out_splits, in_splits, self.ep_group, self.clock)
        order = expert_major(got).to(rows.device)         # rank-major rows -> by expert
        y = self.experts(received[order], got.sum(0).tolist())
        back = y[torch.argsort(order)]
        return AllToAll.apply(back, in_splits, out_splits, self.ep_group, self.clock)


def expert_major(got: torch.Tensor) -> torch.Tensor:
    """Row indices that reorder rows received rank by rank (got[j, e] from rank j for local
    expert e, in that order) expert by expert: expert 0's from every rank, then expert 1's."""
    got = got.cpu()   # once: a GPU's counts read one by one would wait on the device each time
    flat = got.flatten()
    starts = (torch.cumsum(flat, 0) - flat).view_as(got)
    pieces = [torch.arange(int(starts[j, e]), int(starts[j, e] + got[j, e]))
              for e in range(got.shape[1]) for j in range(got.shape[0])]
    return torch.cat(pieces) if pieces else torch.zeros(0, dtype=torch.long)


@torch.no_grad()
def balance(layers, group) -> torch.Tensor:
    """torchtitan's auxiliary-loss-free load balancing over `layers` (MoE modules), before the
    optimizer step: the iteration's tokens per expert summed over `group` (every rank that
    routed some of this stage's tokens), each expert bias moved, the counts zeroed. Returns
    the counts, (layers, experts)."""
    counts = torch.stack([m.tokens_per_expert for m in layers])
    if group is not None:
        dist.all_reduce(counts, group=group)
    for m, c in zip(layers, counts):
        if m.load_balance_coeff:
            delta = m.load_balance_coeff * torch.sign(c.mean() - c)
            m.expert_bias += delta - delta.mean()
        m.tokens_per_expert.zero_()
    return counts


def local(t):
    """A DTensor's part on this rank; a plain tensor as it is."""
    return t.to_local() if isinstance(t, DTensor) else t


# ---- placements over the tensor-parallel mesh (module docstring) ------------------------------
def shard_sequence(x, mesh):
    """Replicated (b, s, ...) -> this rank's part of the sequence; the backward gathers."""
    return DTensor.from_local(x, mesh, [Replicate()]).redistribute(mesh, [Shard(1)]).to_local()


def gather_sequence(x, mesh):
    """The ranks' parts of the sequence -> the whole, on every rank; the backward splits."""
    return DTensor.from_local(x, mesh, [Shard(1)]).redistribute(mesh, [Replicate()]).to_local()


def reduce_partial(x, mesh):
    """Partial sums over the ranks -> their sum, on every rank."""
    return DTensor.from_local(x, mesh, [Partial()]).redistribute(mesh, [Replicate()]).to_local()


def sum_grad(x, mesh):
    """x as it is; its gradient summed over the ranks (each rank's is a part of it)."""
    return DTensor.from_local(x, mesh, [Replicate()]).to_local(grad_placements=[Partial()])


class Balancer:
    """A rank's MoE layers, over its stages: the load balancing before each optimizer step
    (`step`, torchtitan's pre-hook) and what the record says of them (`record`): per step the
    experts' load, max over mean tokens per expert of the stage's global counts (the worst of
    its layers, and each layer's), and this rank's seconds in the dispatch and combine
    all-to-alls; over the timed steps (those after the warm-up) their sums and each layer's
    tokens per expert (analysis/sections/moe.py turns them into the report's figures)."""

    def __init__(self, modules, group, layout, recompute: bool, warmup: int):
        self.layers = [(name, m) for module in modules for name, m in module.named_modules()
                       if isinstance(m, MoE)]
        self.group, self.layout, self.warmup = group, layout, warmup
        self.double = 2 if recompute else 1   # recomputed forwards count their tokens again
        self.steps: list = []
        self.tokens: torch.Tensor | None = None

    def step(self) -> None:
        if not self.layers:   # a pipeline stage of dense layers only
            self.steps.append({"load_max_mean": None, "load_by_layer": [], "a2a_s": 0.0})
            return
        counts = balance([m for _, m in self.layers], self.group) / self.double
        loads = (counts.max(dim=1).values / counts.mean(dim=1).clamp_min(1e-12)).tolist()
        self.steps.append({"load_max_mean": max(loads), "load_by_layer": loads,
                           "a2a_s": sum(m.clock.take() for _, m in self.layers)})
        if len(self.steps) > self.warmup:
            self.tokens = counts if self.tokens is None else self.tokens + counts

    def record(self, record) -> None:
        first = self.layers[0][1] if self.layers else None
        timed = self.steps[self.warmup:]
        loads = [s["load_max_mean"] for s in timed if s["load_max_mean"] is not None]
        record["moe"] = {
            "layers": [name for name, _ in self.layers],
            "experts": first.count if first else None, "top_k": first.top_k if first else None,
            "ep": self.layout.ep, "local_experts": list(first.experts.ids) if first else [],
            "dispatch": "all_to_all_single (torch.distributed)" if self.layout.ep > 1 else "local",
            "steps": self.steps,
            "timed": {"steps": len(timed), "a2a_s": sum(s["a2a_s"] for s in timed),
                      "load_max_mean": sum(loads) / len(loads) if loads else None},
            "tokens_per_expert": self.tokens.tolist() if self.tokens is not None else None}
