"""Qwen3's mixtures of experts (30B-A3B, 235B-A22B) on the CPU: the same definition as
torchtitan 0.3.0's qwen3 MoE flavours, trained at any layout of frameworks/pytorch/layouts/parallelize.py,
expert parallelism included, with plain scaled-dot-product attention (as
frameworks/pytorch/models/deepseek_v3.py says why; the GPU path is frameworks/pytorch/titan/moe_session.py).
tests/unit/test_qwen3_moe.py checks both definitions' parameters, activated FLOPs and logits.

The architecture (Qwen3 technical report, 2025; torchtitan's `_build_qwen3_moe_layers`): a token
embedding, `layers` pre-norm blocks (RMSNorm, eps 1e-6) of grouped-query attention and a MoE
feed-forward, a final RMSNorm and an untied output layer.
- Attention: `heads` query heads of `head_dim` (wider than hidden / heads: 32 x 128 at hidden
  2048) sharing `kv_heads` key-value heads; each head's query and key RMS-normalised (`q_norm`,
  `k_norm`, one weight of head_dim for all heads) before rotary positions (theta `rope_theta`,
  the rotate-half convention, torchtitan's CosSinRoPE); softmax scale head_dim^-1/2.
- MoE (frameworks/pytorch/models/moe.py) in every layer: `experts` routed SwiGLU experts `moe_hidden`
  wide, softmax scores, the top `top_k` renormalised; no shared expert; the load balancing of
  DeepSeek-V3 (torchtitan's default coefficient).
Initial values: torchtitan's qwen3 (normal): N(0, 0.02) everywhere, but the attention's output
and the experts' w2 N(0, 0.02 / sqrt(2 layers)) (Megatron's scaled init), norms at one.
"""
import sys

import torch
from torch import nn
from torch.distributed.tensor import Replicate
from torch.distributed.tensor.parallel import ColwiseParallel, ParallelStyle, RowwiseParallel

from frameworks.pytorch import models
from frameworks.pytorch.layouts import parallelize
from frameworks.pytorch.models import llama3, moe
from frameworks.pytorch.models.gpt import loss_fn, synthetic_tokens  # noqa: F401 (the family's surface)
from frameworks.pytorch.models.gpt import seeded_normal
from frameworks.pytorch.models.llama3 import CausalAttention, FeedForward

IMPLEMENTATION = "dlbench qwen3_moe (frameworks/pytorch/models/qwen3_moe.py, scaled-dot-product attention)"
EPS = 1e-6
INIT_STD = 0.02

# its GPU path: torchtitan's sharding declarations and parallelize function, its flavours
TITAN_SHARDING = "torchtitan.models.qwen3.sharding:set_qwen3_sharding_config"
TITAN_PARALLELIZE = "torchtitan.models.qwen3:parallelize_qwen3"
TITAN_FLAVOURS = {"30b_a3b": "30B-A3B", "235b_a22b": "235B-A22B"}   # our size -> torchtitan's flavour
TITAN_FUSED_QKV = True    # its attention's wq, wk, wv one projection there (titan_moe.torchtitan_name)


def tied(cfg: dict) -> dict:
    """Qwen3's MoE output layer is its own."""
    return {}


def rotate_half(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """x (b, s, heads, head_dim) turned by `angles` (s, head_dim / 2), the two halves of each
    head as pairs (torchtitan's CosSinRoPE)."""
    angles = torch.cat([angles, angles], dim=-1)
    cos, sin = angles.cos()[None, :, None], angles.sin()[None, :, None]
    xf = x.float()
    half = xf.shape[-1] // 2
    return (xf * cos + torch.cat((-xf[..., half:], xf[..., :half]), dim=-1) * sin).type_as(x)


class HeadNorm(nn.RMSNorm):
    """One RMSNorm weight for every head; a tensor-parallel rank's heads are a part of them,
    so the weight's gradient is summed over `tp_mesh` (frameworks/pytorch/models/moe.py's sum_grad)."""

    tp_mesh = None

    def forward(self, x):
        weight = self.weight if self.tp_mesh is None else moe.sum_grad(self.weight, self.tp_mesh)
        return nn.functional.rms_norm(x, self.normalized_shape, weight, self.eps)


class Attention(nn.Module):
    def __init__(self, hidden, heads, kv_heads, head_dim, theta):
        super().__init__()
        self.head_dim, self.theta = head_dim, theta
        self.wq = nn.Linear(hidden, heads * head_dim, bias=False)
        self.wk = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.wv = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.wo = nn.Linear(heads * head_dim, hidden, bias=False)
        self.q_norm, self.k_norm = HeadNorm(head_dim, eps=EPS), HeadNorm(head_dim, eps=EPS)
        self.core = CausalAttention()

    def forward(self, x, positions):
        b, s = x.shape[:2]
        q, k, v = (w(x).view(b, s, -1, self.head_dim) for w in (self.wq, self.wk, self.wv))
        q, k = self.q_norm(q), self.k_norm(k)
        angles = positions.float()[:, None] * llama3.inverse_frequencies(self.head_dim, self.theta, None).to(x.device)
        q, k = rotate_half(q, angles), rotate_half(k, angles)
        out = self.core(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), positions)
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))


class Block(llama3.Block):
    """llama3.Block's forward (activation checkpointing), with Qwen3's attention and MoE."""

    def __init__(self, cfg: dict):
        nn.Module.__init__(self)
        h = cfg["hidden"]
        self.attention_norm, self.ffn_norm = nn.RMSNorm(h, eps=EPS), nn.RMSNorm(h, eps=EPS)
        self.attention = Attention(h, cfg["heads"], cfg["kv_heads"], cfg["head_dim"], cfg["rope_theta"])
        self.moe = moe.MoE(h, cfg["moe_hidden"], cfg["experts"], 0, cfg["top_k"], "softmax", FeedForward,
                           route_norm=True, load_balance_coeff=cfg.get("load_balance_coeff"))
        self.recompute = bool(cfg.get("recompute"))

    def _forward(self, x, positions):
        h = x + self.attention(self.attention_norm(x), positions)
        return h + self.moe(self.ffn_norm(h))


class Model(llama3.Model):
    """llama3.Model's forward, stages and tying (none), with Qwen3's MoE blocks."""

    def __init__(self, **cfg):
        nn.Module.__init__(self)
        self.tied, self.positions = False, None
        self.embed = nn.Embedding(cfg["vocab_size"], cfg["hidden"])
        self.layers = nn.ModuleDict({str(i): Block(cfg) for i in range(cfg["layers"])})
        self.head = llama3.Head(cfg["hidden"], cfg["vocab_size"], EPS)
        self.init_settings = {"layers": cfg["layers"]}   # full_value's residual scaling, every stage

    def tensor_parallel(self, tp_mesh) -> None:
        """After parallelize.py's plan: the per-head norms' weights on tp_mesh."""
        for layer in self.layers.values():
            layer.attention.q_norm.tp_mesh = layer.attention.k_norm.tp_mesh = tp_mesh


def parameter_count(cfg: dict) -> int:
    with torch.device("meta"):
        return models.count_parameters(Model(**cfg))


def full_value(name: str, shape, seed: int, rows=None, layers=None) -> torch.Tensor:
    """The single-device model's initial value of parameter `name` (module docstring); a
    routed expert's drawn expert by expert (`rows`: the experts a rank holds); `layers`: the
    model's (Model.init_settings)."""
    parts = name.split(".")
    if parts[-2].endswith("norm"):
        return torch.ones(shape)
    residual = parts[-2] == "wo" or (parts[-2] == "experts" and parts[-1] == "w2")
    std = INIT_STD / (2 * layers) ** 0.5 if residual else INIT_STD
    if parts[-2] == "experts":
        ids = range(shape[0]) if rows is None else rows
        return torch.stack([seeded_normal(shape[1:], std, seed, f"{name}.{e}") for e in ids])
    return seeded_normal(shape, std, seed, name)


# ---- its split, its session and its GPU path ----------------------------------------------------
def tp_plan(model, sequence_parallel: bool) -> dict:
    """torchtitan's plan of Qwen3's attention (wq, wk, wv by columns, wo by rows; the per-head
    norms replicated), embedding and output as Llama 3's; the experts are expert_parallel.py's."""
    plan: dict[str, ParallelStyle] = {"embed": RowwiseParallel(input_layouts=Replicate(), output_layouts=Replicate())} \
        if model.embed is not None else {}
    for i in model.layers:
        p = f"layers.{i}.attention"
        plan.update({f"{p}.wq": ColwiseParallel(), f"{p}.wk": ColwiseParallel(), f"{p}.wv": ColwiseParallel(),
                     f"{p}.wo": RowwiseParallel()})
    return {**plan, **parallelize.head_plan(model, "head.norm", False)}


def session(spec, dist):
    """torchtitan's model on GPUs, this definition on the CPU (frameworks/pytorch/titan/moe_session.py)."""
    from frameworks.pytorch.titan import moe_session as titan_moe
    return titan_moe.session(sys.modules[__name__], spec, dist)


def titan_config(cfg: dict, attn_backend: str):
    """torchtitan's model config of this shape (its builders; frameworks/pytorch/titan/moe_session.py)."""
    from torchtitan.models.common import CosSinRoPE, Embedding, Linear
    from torchtitan.models.qwen3 import _EMBEDDING_INIT, _LINEAR_INIT, _build_qwen3_moe_layers, _qwen3_norm
    from torchtitan.models.qwen3.model import Qwen3Model

    dim, vocab, head_dim = cfg["hidden"], cfg["vocab_size"], cfg["head_dim"]
    layers = _build_qwen3_moe_layers(
        n_layers=cfg["layers"], dim=dim, n_heads=cfg["heads"], n_kv_heads=cfg["kv_heads"], head_dim=head_dim,
        moe_hidden_dim=cfg["moe_hidden"], num_experts=cfg["experts"], top_k=cfg["top_k"], fuse_qkv=True,
        attn_backend=attn_backend, moe_comm_backend=cfg.get("dispatch", "standard"),
        rope=CosSinRoPE.Config(dim=head_dim, max_seq_len=max(40960, cfg["seq_len"]), theta=cfg["rope_theta"]))
    return Qwen3Model.Config(
        vocab_size=vocab, dim=dim, norm=_qwen3_norm(dim), layers=layers,
        tok_embeddings=Embedding.Config(num_embeddings=vocab, embedding_dim=dim, param_init=_EMBEDDING_INIT),
        lm_head=Linear.Config(in_features=dim, out_features=vocab, param_init=_LINEAR_INIT))
