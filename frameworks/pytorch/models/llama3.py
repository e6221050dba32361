"""Llama 3 on the CPU: the same definition as torchtitan's llama3 model, trained at any
layout of frameworks/pytorch/layouts/parallelize.py with plain scaled-dot-product attention.

torchtitan 0.3.0's attention backends are FlexAttention and varlen, and FlexAttention has no
backward on the CPU in torch 2.13 ("FlexAttention does not support backward on CPU"), so on
the CPU this module is the model; on a GPU torchtitan's own model and parallelize functions
run (frameworks/pytorch/titan/session.py). tests/unit/test_llama3.py checks that both have the same
parameters and FLOPs, for the tiny size and for 8B (on the meta device).

The architecture (Llama 3's, "The Llama 3 Herd of Models", 2024, table 3): a token embedding
(no position embedding), `layers` pre-norm blocks of RMSNorm, grouped-query attention (`heads`
query heads sharing `kv_heads` key-value heads) with rotary position embeddings (theta
500,000 and Llama 3.1's frequency scaling, as torchtitan computes them) and a SwiGLU MLP
(w2(silu(w1 x) * w3 x), `ffn_hidden` wide), then an RMSNorm and the output layer; no biases,
no dropout. The output layer is the token embedding only where `tie_embeddings` (the 1B of
Llama 3.2); Llama 3 and 3.1 are untied.

As frameworks/pytorch/models/gpt.py, the model knows nothing of parallelism: its parts are named for
the tensor-parallel plan (`tp_plan`, at the end of this module, with the `session`: `embed`,
`layers.<i>.attention.wq|wk|wv|wo`,
`layers.<i>.feed_forward.w1|w2|w3`, `head.output`), head counts are read from the projections'
outputs (a tensor-parallel rank holds heads / tp of them), a pipeline stage is the model with
other stages' parts dropped (`keep`), and each layer's attention core is a module of its own
(`layers.<i>.attention.core`) that context parallelism replaces
(frameworks/pytorch/layouts/context_parallel.py), setting `positions`, the places in the sequence of
the tokens a rank holds. Initial values: torchtitan's (normal in place of its truncated
normal), from a generator seeded by the seed and the parameter's name (`full_value`).
"""
import math
import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, ParallelStyle, PrepareModuleInput, RowwiseParallel,
                                               SequenceParallel)
from torch.utils.checkpoint import checkpoint

from frameworks.pytorch import models
from frameworks.pytorch.layouts import parallelize
from frameworks.pytorch.models.gpt import (keep_stage, loss_fn,  # noqa: F401 (the family's surface)
                                           synthetic_tokens)
from frameworks.pytorch.models.gpt import seeded_normal

IMPLEMENTATION = "dlbench llama3 (frameworks/pytorch/models/llama3.py, scaled-dot-product attention)"
INIT_STD = 0.02
ROPE_SCALING = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192}   # Llama 3.1's


def tied(cfg: dict) -> dict:
    """{output weight: embedding weight} where the model ties them, else {}."""
    return {"head.output.weight": "embed.weight"} if cfg.get("tie_embeddings") else {}


def inverse_frequencies(head_dim: int, theta: float, scaling) -> torch.Tensor:
    """RoPE's frequencies with Llama 3.1's scaling: wavelengths above the original context
    / low_freq_factor divided by `factor`, below it / high_freq_factor kept, smoothed between
    (torchtitan's and Meta's reference code)."""
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim))
    if not scaling:
        return freqs
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    original = scaling["original_max_position_embeddings"]
    wavelen = 2 * math.pi / freqs
    smooth = (original / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * freqs / factor + smooth * freqs
    freqs = torch.where(wavelen > original / low, freqs / factor, freqs)
    medium = ~(wavelen < original / high) & ~(wavelen > original / low)
    return torch.where(medium, smoothed, freqs)


def rotate(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """x (b, s, heads, head_dim) turned by `angles` (s, head_dim / 2), adjacent dimensions
    as pairs (torchtitan's complex RoPE in real arithmetic)."""
    cos, sin = angles.cos()[None, :, None], angles.sin()[None, :, None]
    pairs = x.float().unflatten(-1, (-1, 2))
    a, b = pairs[..., 0], pairs[..., 1]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2).type_as(x)


class CausalAttention(nn.Module):
    """softmax(q k^T / sqrt(d) + causal mask) v, the key-value heads shared by heads /
    kv_heads query heads each; q, k, v as (b, heads, s, head_dim)."""

    def forward(self, q, k, v, positions):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


class Attention(nn.Module):
    def __init__(self, hidden, heads, kv_heads, theta, scaling):
        super().__init__()
        self.head_dim = hidden // heads
        self.wq = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.wk = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, hidden, bias=False)
        self.core = CausalAttention()
        self.theta, self.scaling = theta, scaling

    def forward(self, x, positions):
        b, s = x.shape[:2]
        q, k, v = (w(x).view(b, s, -1, self.head_dim) for w in (self.wq, self.wk, self.wv))
        angles = positions.float()[:, None] * inverse_frequencies(self.head_dim, self.theta, self.scaling).to(x.device)
        q, k = rotate(q, angles), rotate(k, angles)
        out = self.core(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), positions)
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))


class FeedForward(nn.Module):
    def __init__(self, hidden, ffn_hidden):
        super().__init__()
        self.w1 = nn.Linear(hidden, ffn_hidden, bias=False)
        self.w2 = nn.Linear(ffn_hidden, hidden, bias=False)
        self.w3 = nn.Linear(hidden, ffn_hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, hidden, heads, kv_heads, ffn_hidden, theta, scaling, eps, recompute):
        super().__init__()
        self.attention_norm = nn.RMSNorm(hidden, eps=eps)
        self.attention = Attention(hidden, heads, kv_heads, theta, scaling)
        self.ffn_norm = nn.RMSNorm(hidden, eps=eps)
        self.feed_forward = FeedForward(hidden, ffn_hidden)
        self.recompute = recompute

    def forward(self, x, positions):
        if self.recompute and self.training:  # activation checkpointing: recomputed in backward
            return checkpoint(self._forward, x, positions, use_reentrant=False)
        return self._forward(x, positions)

    def _forward(self, x, positions):
        h = x + self.attention(self.attention_norm(x), positions)
        return h + self.feed_forward(self.ffn_norm(h))


class Head(nn.Module):
    def __init__(self, hidden, vocab_size, eps):
        super().__init__()
        self.norm = nn.RMSNorm(hidden, eps=eps)
        self.output = nn.Linear(hidden, vocab_size, bias=False)

    def forward(self, x):
        return self.output(self.norm(x))


class Model(nn.Module):
    def __init__(self, vocab_size, hidden, layers, heads, kv_heads, ffn_hidden, seq_len,
                 rope_theta=500000.0, rope_scaling=ROPE_SCALING, norm_eps=1e-5,
                 tie_embeddings=False, recompute=False, **_):
        super().__init__()
        self.tied = tie_embeddings
        self.seq_len = seq_len
        self.positions = None  # the sequence places of the tokens this rank holds; None: all
        self.embed = nn.Embedding(vocab_size, hidden)
        self.layers = nn.ModuleDict({str(i): Block(hidden, heads, kv_heads, ffn_hidden, rope_theta,
                                                   rope_scaling, norm_eps, recompute)
                                     for i in range(layers)})
        self.head = Head(hidden, vocab_size, norm_eps)
        self.tie()

    def tie(self):
        if self.tied and self.embed is not None and self.head is not None:
            self.head.output.weight = self.embed.weight

    def keep(self, layer_ids, first: bool, last: bool) -> "Model":
        return keep_stage(self, layer_ids, first, last, tied=self.tied)

    def forward(self, x):
        h = self.embed(x) if self.embed is not None else x
        positions = self.positions
        if positions is None:
            positions = torch.arange(x.shape[1], device=x.device)
        for layer in self.layers.values():
            h = layer(h, positions)
        return self.head(h) if self.head is not None else h


def parameter_count(cfg: dict) -> int:
    """The model's parameters (a tied output layer counted once), from a meta-device build."""
    with torch.device("meta"):
        return models.count_parameters(Model(**cfg))


def full_value(name: str, shape, seed: int) -> torch.Tensor:
    """The single-device model's initial value of parameter `name`, as torchtitan's llama3
    initialises it (normal in place of truncated normal): RMSNorm weights at one; the token
    embedding N(0, 1); the output layer N(0, hidden^-1/2); wq, wk, wv, w1 N(0, 0.02); wo, w2,
    w3 N(0, 0.02 / sqrt(2 (layer + 1))), torchtitan's depth scaling. A tied embedding takes
    the output layer's value (frameworks/pytorch/layouts/parallelize.py asks for it by that name), as
    torchtitan's tied 1B skips the embedding's own initialisation."""
    std = init_std(name, shape)
    return torch.ones(shape) if std is None else seeded_normal(shape, std, seed, name)


def init_std(name: str, shape, depth_scaled=("wo", "w2", "w3")):
    """torchtitan's std of a weight by its name (full_value's rule; None: an RMSNorm's, at
    one): `depth_scaled` weights, by their module's name or their own, N(0, 0.02 / sqrt(2
    (layer + 1)))."""
    parts = name.split(".")
    if parts[-2].endswith("norm"):
        return None
    if name == "embed.weight":
        return 1.0
    if name == "head.output.weight":
        return shape[-1] ** -0.5
    if parts[-2] in depth_scaled or parts[-1] in depth_scaled:
        return INIT_STD / math.sqrt(2 * (int(parts[1]) + 1))
    return INIT_STD


# ---- its split and its session ---------------------------------------------------------------
def tp_plan(model, sequence_parallel: bool) -> dict:
    """torchtitan's tensor-parallel plan of Llama 3 (parallelize_llama): the embedding by
    vocabulary rows, wq/wk/wv and w1/w3 by columns, wo and w2 by rows, the output layer by
    vocabulary columns for loss_parallel; with sequence parallelism the RMSNorms run on a
    rank's part of the sequence and each block's input is gathered once before its
    projections."""
    seq = Shard(1) if sequence_parallel else Replicate()
    plan: dict[str, ParallelStyle] = {}
    if model.embed is not None:
        plan["embed"] = RowwiseParallel(input_layouts=Replicate(), output_layouts=seq)
    for i in model.layers:
        p = f"layers.{i}"
        plan.update({f"{p}.attention.wq": ColwiseParallel(), f"{p}.attention.wk": ColwiseParallel(),
                     f"{p}.attention.wv": ColwiseParallel(),
                     f"{p}.attention.wo": RowwiseParallel(output_layouts=seq),
                     f"{p}.feed_forward.w1": ColwiseParallel(), f"{p}.feed_forward.w3": ColwiseParallel(),
                     f"{p}.feed_forward.w2": RowwiseParallel(output_layouts=seq)})
        if sequence_parallel:
            plan.update({f"{p}.attention_norm": SequenceParallel(), f"{p}.ffn_norm": SequenceParallel(),
                         f"{p}.attention": PrepareModuleInput(input_layouts=(seq, None),
                                                              desired_input_layouts=(Replicate(), None)),
                         f"{p}.feed_forward": PrepareModuleInput(input_layouts=(seq,),
                                                                 desired_input_layouts=(Replicate(),))})
    return {**plan, **parallelize.head_plan(model, "head.norm", sequence_parallel)}


def session(spec, dist):
    """torchtitan's Llama 3 where the point's ranks have GPUs and torchtitan loads, else this
    definition with scaled dot-product attention (titan.choose; docs/llama3.md)."""
    from frameworks.pytorch.titan import session as titan
    return titan.session(sys.modules[__name__], spec, dist, titan.TitanSession)
