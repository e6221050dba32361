"""GPT-OSS (20B, 120B) on the CPU: the same definition as torchtitan 0.3.0's gpt_oss model, trained
at any layout of frameworks/pytorch/layouts/parallelize.py but context parallelism, expert
parallelism included, with its attention written out (scores, the window, the sinks, softmax);
the GPU path is torchtitan's own model (frameworks/pytorch/titan/moe_session.py), whose
FlexAttention and grouped GEMM have no backward on the CPU (frameworks/pytorch/models/
deepseek_v3.py says so). tests/unit/test_gpt_oss.py checks the window and the sinks by hand,
both definitions' parameters and FLOPs, and torchtitan's logits from these weights.

The architecture (OpenAI's gpt-oss model card, 2025; torchtitan's `_build_gptoss_layers`): a
token embedding, `layers` pre-norm blocks (RMSNorm) of grouped-query attention and a MoE, a
final RMSNorm and an untied output layer.
- Attention: `heads` query heads of `head_dim` sharing `kv_heads` key-value heads, every
  projection with a bias; rotary positions with YaRN's scaling (theta 150,000, factor 32 over
  4096, fractional cut-offs: `truncate=False`; the rotate-half convention) and YaRN's
  attention scale folded into the softmax's, head_dim^-1/2 x (0.1 ln 32 + 1)^2. The even
  layers (0, 2, ...) attend over a sliding window of `sliding_window` keys (the query's own
  and the w - 1 before it), the odd ones over every key before; each head has a learned sink,
  a logit beside its scores in the softmax's denominator that no value goes with, so a query
  may attend to "nothing" (torchtitan's out x sigmoid(lse - sink), the same thing).
- MoE (frameworks/pytorch/models/moe.py) in every layer: a router with a bias, softmax over
  the experts and the top `top_k` renormalised (the softmax over the chosen logits, OpenAI's);
  `experts` routed experts (`Experts` below): a fused gate-and-linear projection 2 x
  `moe_hidden` wide with a bias, the gate and linear halves interleaved, the clamped SwiGLU
  (gate clamped above at 7, linear to [-7, 7], gate x sigmoid(1.702 gate) x (linear + 1)), the
  output projection with a bias; no shared expert; DeepSeek-V3's load balancing
  (torchtitan's coefficient).
Initial values (torchtitan's, normal in place of its truncated normal): N(0, 0.02 /
sqrt(2 (layer + 1))) for every weight of a layer, the sinks and the experts' biases; the other
biases zero; the embedding N(0, 0.02); the output layer N(0, hidden^-1/2); norms at one.
"""
import math
import sys

import torch
from torch import nn
from torch.distributed.tensor import DTensor, Shard, distribute_tensor

from frameworks.common import capability
from frameworks.pytorch import models
from frameworks.pytorch.layouts.sharded_embedding import ScaleGrad
from frameworks.pytorch.models import llama3, moe, qwen3_moe
from frameworks.pytorch.models.deepseek_v3 import yarn_frequencies
from frameworks.pytorch.models.gpt import loss_fn, synthetic_tokens  # noqa: F401 (the family's surface)
from frameworks.pytorch.models.gpt import seeded_normal
from frameworks.pytorch.models.qwen3_moe import rotate_half

IMPLEMENTATION = "dlbench gpt_oss (frameworks/pytorch/models/gpt_oss.py, attention with sinks written out)"
INIT_STD = 0.02
SWIGLU_ALPHA, SWIGLU_LIMIT = 1.702, 7.0

# its GPU path: torchtitan's sharding declarations and parallelize function, its flavours
TITAN_SHARDING = "torchtitan.models.gpt_oss.sharding:set_gpt_oss_sharding_config"
TITAN_PARALLELIZE = "torchtitan.models.gpt_oss:parallelize_gptoss"
TITAN_FLAVOURS = {"20b": "20b", "120b": "120b"}   # our size -> torchtitan's flavour
TITAN_FUSED_QKV = True    # its attention's wq, wk, wv one projection there (titan_moe.torchtitan_name)
tp_plan = qwen3_moe.tp_plan   # Qwen3's names and splits (the biases go with their weights' splits)


def tied(cfg: dict) -> dict:
    """GPT-OSS's output layer is its own."""
    return {}


def softmax_scale(cfg: dict) -> float:
    """head_dim^-1/2, times YaRN's attention factor squared (on q and k both) where it scales."""
    factor = (cfg.get("rope_scaling") or {}).get("factor", 1.0)
    m = 0.1 * math.log(factor) + 1.0 if factor > 1.0 else 1.0
    return cfg["head_dim"] ** -0.5 * m * m


def sink_attention(q, k, v, sinks, positions, window, scale):
    """softmax(q k^T x scale over each query's keys, and its head's sink) v (module docstring):
    q (b, heads, s, d), k and v (b, kv_heads, s, d), `sinks` (heads,), `positions` the places
    of the s tokens; a query at p sees the keys at p - window < place <= p (window None: every
    place <= p)."""
    groups = q.shape[1] // k.shape[1]
    k, v = (t.repeat_interleave(groups, dim=1) for t in (k, v))
    scores = (q @ k.transpose(-1, -2)).float() * scale
    behind = positions[:, None] - positions[None, :]      # the query's place less the key's
    seen = (behind >= 0) if window is None else (behind >= 0) & (behind < window)
    scores = scores.masked_fill(~seen, float("-inf"))
    sink = sinks.float()[None, :, None, None].expand(*scores.shape[:-1], 1)
    weights = torch.cat([scores, sink], dim=-1).softmax(dim=-1)[..., :-1]
    return weights.to(v.dtype) @ v


class SinkAttention(nn.Module):
    """A layer's attention core: its window (None: full) and softmax scale."""

    def __init__(self, window, scale):
        super().__init__()
        self.window, self.scale = window, scale

    def forward(self, q, k, v, positions, sinks):
        return sink_attention(q, k, v, sinks, positions, self.window, self.scale)


class Attention(nn.Module):
    def __init__(self, cfg: dict, window):
        super().__init__()
        h, heads, kv, d = cfg["hidden"], cfg["heads"], cfg["kv_heads"], cfg["head_dim"]
        self.head_dim, self.theta, self.scaling = d, cfg["rope_theta"], cfg.get("rope_scaling")
        self.wq, self.wk, self.wv = nn.Linear(h, heads * d), nn.Linear(h, kv * d), nn.Linear(h, kv * d)
        self.wo = nn.Linear(heads * d, h)
        self.sinks = nn.Parameter(torch.empty(heads))   # Model.tensor_parallel splits them by heads
        self.core = SinkAttention(window, softmax_scale(cfg))

    def forward(self, x, positions):
        b, s = x.shape[:2]
        q, k, v = (w(x).view(b, s, -1, self.head_dim) for w in (self.wq, self.wk, self.wv))
        freqs = yarn_frequencies(self.head_dim, self.theta, self.scaling, truncate=False)
        angles = positions.float()[:, None] * freqs.to(x.device)
        q, k = rotate_half(q, angles), rotate_half(k, angles)
        out = self.core(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), positions, moe.local(self.sinks))
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))


def swiglu(h):
    """GPT-OSS's clamped SwiGLU of the interleaved gate (even) and linear (odd) columns."""
    gate, linear = h[..., ::2].clamp(max=SWIGLU_LIMIT), h[..., 1::2].clamp(-SWIGLU_LIMIT, SWIGLU_LIMIT)
    return gate * torch.sigmoid(SWIGLU_ALPHA * gate) * (linear + 1)


def tp_degree(weight) -> int:
    """The tensor-parallel ranks a weight's DTensor splits over (1: none)."""
    if isinstance(weight, DTensor) and "tp" in (weight.device_mesh.mesh_dim_names or ()):
        return weight.device_mesh.size()
    return 1


class Experts(moe.Experts):
    """GPT-OSS's routed experts (module docstring), torchtitan's GptOssGroupedExperts's weights;
    tensor parallelism splits the hidden width (mlp1's rows, mlp2's columns) and replicates
    mlp2's bias, added as bias / tp on each rank so that the partial sums add it once, its
    gradient whole (torchtitan's ScaleBiasForward)."""

    SPLIT: dict[str, int | None] = {"mlp1_weight": 1, "mlp1_bias": 1, "mlp2_weight": 2, "mlp2_bias": None}

    def __init__(self, experts, hidden, moe_hidden):
        nn.Module.__init__(self)
        self.ids, self.grad_scale = range(experts), 1.0
        self.mlp1_weight = nn.Parameter(torch.empty(experts, 2 * moe_hidden, hidden))
        self.mlp1_bias = nn.Parameter(torch.empty(experts, 2 * moe_hidden))
        self.mlp2_weight = nn.Parameter(torch.empty(experts, hidden, moe_hidden))
        self.mlp2_bias = nn.Parameter(torch.empty(experts, hidden))

    def weights(self) -> list:
        w1, b1, w2, b2 = super().weights()
        tp = tp_degree(self.mlp2_weight)
        return [w1, b1, w2, ScaleGrad.apply(b2, tp) / tp if tp > 1 else b2]

    @staticmethod
    def expert(rows, w1, b1, w2, b2):
        return swiglu(rows @ w1.t() + b1) @ w2.t() + b2


class Block(qwen3_moe.Block):
    """Qwen3's block (its forward), with GPT-OSS's attention (a window on even layers) and MoE."""

    def __init__(self, cfg: dict, layer_id: int):
        nn.Module.__init__(self)
        h, eps = cfg["hidden"], cfg.get("norm_eps", 1e-5)
        self.attention_norm, self.ffn_norm = nn.RMSNorm(h, eps=eps), nn.RMSNorm(h, eps=eps)
        self.attention = Attention(cfg, cfg["sliding_window"] if layer_id % 2 == 0 else None)
        self.moe = moe.MoE(h, cfg["moe_hidden"], cfg["experts"], 0, cfg["top_k"], "softmax", None,
                           route_norm=True, load_balance_coeff=cfg.get("load_balance_coeff"),
                           gate_bias=True, experts_class=Experts)
        self.recompute = bool(cfg.get("recompute"))


class Model(llama3.Model):
    """llama3.Model's forward, stages and tying (none), with GPT-OSS's blocks."""

    def __init__(self, **cfg):
        nn.Module.__init__(self)
        self.tied, self.positions = False, None
        self.embed = nn.Embedding(cfg["vocab_size"], cfg["hidden"])
        self.layers = nn.ModuleDict({str(i): Block(cfg, i) for i in range(cfg["layers"])})
        self.head = llama3.Head(cfg["hidden"], cfg["vocab_size"], cfg.get("norm_eps", 1e-5))

    def tensor_parallel(self, tp_mesh) -> None:
        """After the plan (tp_plan): each layer's sinks split by heads, as wq's heads are."""
        for layer in self.layers.values():
            sinks = layer.attention.sinks
            layer.attention.sinks = nn.Parameter(distribute_tensor(sinks, tp_mesh, [Shard(0)]))


def parameter_count(cfg: dict) -> int:
    with torch.device("meta"):
        return models.count_parameters(Model(**cfg))


def full_value(name: str, shape, seed: int, rows=None) -> torch.Tensor:
    """The single-device model's initial value of parameter `name` (module docstring); a
    routed expert's drawn expert by expert (`rows`: the experts a rank holds)."""
    parts = name.split(".")
    if parts[-2].endswith("norm"):
        return torch.ones(shape)
    if name in ("embed.weight", "head.output.weight"):
        return seeded_normal(shape, INIT_STD if name == "embed.weight" else shape[-1] ** -0.5, seed, name)
    std = INIT_STD / math.sqrt(2 * (int(parts[1]) + 1))
    if parts[-2] == "experts":
        ids = range(shape[0]) if rows is None else rows
        return torch.stack([seeded_normal(shape[1:], std, seed, f"{name}.{e}") for e in ids])
    return torch.zeros(shape) if parts[-1] == "bias" else seeded_normal(shape, std, seed, name)


# ---- its session and its GPU path (its tensor-parallel plan: tp_plan, Qwen3's) -----------------
def session(spec, dist):
    """torchtitan's model where titan.choose takes it (GPUs where it loads), this definition
    elsewhere (frameworks/pytorch/titan/moe_session.py). torchtitan's GPT-OSS trains in bf16
    only: its experts hand their bf16 output to a combine in the input's dtype, which an fp32
    forward refuses (seen on the CPU, its model built at ep 2 with FSDP: "scatter(): Expected
    self.dtype to be equal to src.dtype"); at bf16 AMP (FSDP's mixed precision) it runs."""
    from frameworks.pytorch.titan import moe_session as titan_moe
    from frameworks.pytorch.titan import session as titan
    family = sys.modules[__name__]
    if spec.precision != "amp" and titan.choose(spec, family)[0]:
        raise capability.Unsupported(
            "torchtitan 0.3.0's GPT-OSS trains in bf16 only (its experts' bf16 output meets an fp32 "
            "combine: scatter(): Expected self.dtype to be equal to src.dtype): use precision=amp")
    return titan_moe.session(family, spec, dist)


def titan_config(cfg: dict, attn_backend: str):
    """torchtitan's model config of this shape: its builder's layers, each attention made again
    with the point's heads and window (the builder fixes 64 x 64, 8 key-value heads and 128)."""
    from torchtitan.models.common import CosSinRoPE, Embedding, Linear, RMSNorm
    from torchtitan.models.gpt_oss import (_EMBEDDING_INIT, _NORM_INIT, _build_gptoss_layers,
                                           _make_gptoss_attn_config, _output_linear_init)
    from torchtitan.models.gpt_oss.model import GptOssModel

    dim, vocab, yarn, eps = cfg["hidden"], cfg["vocab_size"], cfg["rope_scaling"], cfg.get("norm_eps", 1e-5)
    rope = CosSinRoPE.Config(
        dim=cfg["head_dim"], max_seq_len=max(131072, cfg["seq_len"]), theta=cfg["rope_theta"], scaling="yarn",
        rope_factor=yarn["factor"], beta_fast=yarn["beta_fast"], beta_slow=yarn["beta_slow"], truncate=False,
        original_seq_len=yarn["original_seq_len"])
    layers = _build_gptoss_layers(
        dim=dim, n_layers=cfg["layers"], hidden_dim=cfg["moe_hidden"], num_experts=cfg["experts"],
        top_k=cfg["top_k"], load_balance_coeff=1e-3, attn_backend=attn_backend, fuse_qkv=True,
        moe_comm_backend=cfg.get("dispatch", "standard"), rope=rope)
    for i, layer in enumerate(layers):
        layer.attention = _make_gptoss_attn_config(
            dim=dim, layer_id=i, attn_backend=attn_backend, n_heads=cfg["heads"], n_kv_heads=cfg["kv_heads"],
            head_dim=cfg["head_dim"], sliding_window_size=cfg["sliding_window"] if i % 2 == 0 else None,
            fuse_qkv=True, rope=rope)
        layer.attention_norm.eps = layer.ffn_norm.eps = eps
    return GptOssModel.Config(
        dim=dim, vocab_size=vocab, layers=layers,
        tok_embeddings=Embedding.Config(num_embeddings=vocab, embedding_dim=dim, param_init=_EMBEDDING_INIT),
        norm=RMSNorm.Config(normalized_shape=dim, eps=eps, param_init=_NORM_INIT),
        lm_head=Linear.Config(in_features=dim, out_features=vocab, param_init=_output_linear_init(dim)))
