"""DeepSeek-V3 on the CPU: the same definition as torchtitan 0.3.0's deepseek_v3 model, trained
at any layout of frameworks/pytorch/layouts/parallelize.py, expert parallelism included
(frameworks/pytorch/layouts/expert_parallel.py), with plain scaled-dot-product attention.

torchtitan's attention is FlexAttention and its routed experts a grouped GEMM
(torch._grouped_mm), and neither has a backward on the CPU in torch 2.13, so on the CPU this
module is the model; on a GPU torchtitan's own model and parallelize function run
(frameworks/pytorch/titan/moe_session.py). tests/unit/test_deepseek_v3.py checks that both have the
same parameters, activated parameters and FLOPs (tiny, 16B and 671B on the meta device) and
that torchtitan's forward, given this module's weights, computes the same logits.

The architecture (DeepSeek-V3 technical report, 2024, section 2; torchtitan's flavours):
a token embedding, `layers` pre-norm blocks of RMSNorm, multi-head latent attention and a
feed-forward, a final RMSNorm and an untied output layer.
- Multi-head latent attention: queries from x by `wq`, or through a rank-`q_lora_rank`
  bottleneck (`wq_a`, RMSNorm `q_norm`, `wq_b`); keys and values from a rank-`kv_lora_rank`
  latent (`wkv_a`, RMSNorm `kv_norm`, `wkv_b`); each head's query and key are a
  `qk_nope_head_dim` part without position and a `qk_rope_head_dim` part with rotary
  positions (YaRN-scaled frequencies; the key's rotary part, from `wkv_a`, shared by all
  heads); values `v_head_dim` wide; softmax scale (qk head dim)^-1/2 x (0.1 mscale ln(factor)
  + 1)^2; `wo` back to `hidden`.
- Feed-forward: a SwiGLU `ffn_hidden` wide in the first `dense_layers` layers, then the MoE
  layer of frameworks/pytorch/models/moe.py (routed experts, shared experts, load balancing).

As frameworks/pytorch/models/llama3.py, the model knows nothing of parallelism: its parts are named
for the tensor-parallel plan (`tp_plan`, at the end of this module), head counts are read from
the projections' outputs, a pipeline stage is the model with other stages' parts dropped
(`keep`), and each layer's attention core (`layers.<i>.attention.core`) is what context
parallelism replaces. Initial values: torchtitan's (normal in place of its truncated normal),
from a generator seeded by the seed and the parameter's name; a routed expert's by its own
name (`...experts.w1.<e>`), so that an expert-parallel rank's experts hold exactly the
single-device model's values.
"""
import math
import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import Replicate
from torch.distributed.tensor.parallel import ColwiseParallel, ParallelStyle, RowwiseParallel

from frameworks.pytorch import models
from frameworks.pytorch.layouts import parallelize
from frameworks.pytorch.models import llama3, moe
from frameworks.pytorch.models.gpt import loss_fn, synthetic_tokens  # noqa: F401 (the family's surface)
from frameworks.pytorch.models.gpt import seeded_normal
from frameworks.pytorch.models.llama3 import FeedForward, rotate

IMPLEMENTATION = ("dlbench deepseek_v3 (frameworks/pytorch/models/deepseek_v3.py, "
                  "scaled-dot-product attention)")
# its GPU path: torchtitan's sharding declarations and parallelize function, its flavours
TITAN_SHARDING = "torchtitan.models.deepseek_v3.sharding:set_deepseek_v3_sharding_config"
TITAN_PARALLELIZE = "torchtitan.models.deepseek_v3:parallelize_deepseekv3"
TITAN_FLAVOURS = {"16b": "16B", "671b": "671B"}   # our size -> torchtitan's flavour


def tied(cfg: dict) -> dict:
    """DeepSeek-V3's output layer is its own."""
    return {}


def yarn_frequencies(dim: int, theta: float, scaling, truncate: bool = True) -> torch.Tensor:
    """RoPE's inverse frequencies with YaRN's NTK-by-parts scaling (torchtitan's
    _yarn_inv_freq): below beta_fast rotations over the original context kept, above beta_slow
    divided by `factor`, a linear ramp between; the cut-offs floored and ceiled (`truncate`,
    DeepSeek's) or kept fractional."""
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    if not scaling or scaling["factor"] <= 1.0:
        return freqs
    original = scaling["original_seq_len"]

    def correction(rotations):
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = correction(scaling["beta_fast"]), correction(scaling["beta_slow"])
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    return freqs / scaling["factor"] * ramp + freqs * (1 - ramp)


def softmax_scale(cfg: dict) -> float:
    scale = (cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]) ** -0.5
    factor = (cfg.get("rope_scaling") or {}).get("factor", 1.0)
    if factor > 1.0:
        m = 0.1 * cfg.get("mscale", 1.0) * math.log(factor) + 1.0
        scale *= m * m
    return scale


class CausalAttention(nn.Module):
    """softmax(q k^T x scale + causal mask) v; q, k, v as (b, heads, s, head dim), v's width
    its own."""

    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, q, k, v, positions):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)


class Attention(nn.Module):
    """Multi-head latent attention (module docstring)."""

    def __init__(self, cfg: dict):
        super().__init__()
        h, heads = cfg["hidden"], cfg["heads"]
        self.nope, self.rope, self.v_dim = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
        self.kv_rank, self.q_lora_rank = cfg["kv_lora_rank"], cfg["q_lora_rank"]
        qk = self.nope + self.rope
        if self.q_lora_rank:
            self.wq_a = nn.Linear(h, self.q_lora_rank, bias=False)
            self.q_norm = nn.RMSNorm(self.q_lora_rank, eps=cfg.get("norm_eps", 1e-5))
            self.wq_b = nn.Linear(self.q_lora_rank, heads * qk, bias=False)
        else:
            self.wq = nn.Linear(h, heads * qk, bias=False)
        self.wkv_a = nn.Linear(h, self.kv_rank + self.rope, bias=False)
        self.kv_norm = nn.RMSNorm(self.kv_rank, eps=cfg.get("norm_eps", 1e-5))
        self.wkv_b = nn.Linear(self.kv_rank, heads * (self.nope + self.v_dim), bias=False)
        self.wo = nn.Linear(heads * self.v_dim, h, bias=False)
        self.core = CausalAttention(softmax_scale(cfg))
        self.theta, self.scaling = cfg.get("rope_theta", 10000.0), cfg.get("rope_scaling")
        self.tp_mesh = None   # tensor parallelism: the shared rotary key's gradient is summed over it

    def forward(self, x, positions):
        b, s = x.shape[:2]
        q = self.wq(x) if not self.q_lora_rank else self.wq_b(self.q_norm(self.wq_a(x)))
        q = q.view(b, s, -1, self.nope + self.rope)
        q_nope, q_pe = q.split([self.nope, self.rope], dim=-1)
        kv, k_pe = self.wkv_a(x).split([self.kv_rank, self.rope], dim=-1)
        if self.tp_mesh is not None:     # every tp rank's heads use it: a part of its gradient each
            k_pe = moe.sum_grad(k_pe, self.tp_mesh)
        angles = positions.float()[:, None] * yarn_frequencies(self.rope, self.theta, self.scaling).to(x.device)
        q_pe, k_pe = rotate(q_pe, angles), rotate(k_pe[:, :, None], angles)
        q = torch.cat([q_nope, q_pe], dim=-1)
        kv = self.wkv_b(self.kv_norm(kv)).view(b, s, -1, self.nope + self.v_dim)
        k_nope, v = kv.split([self.nope, self.v_dim], dim=-1)
        k = torch.cat([k_nope, k_pe.expand(-1, -1, k_nope.shape[2], -1)], dim=-1)
        out = self.core(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), positions)
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))


class Block(llama3.Block):
    """llama3.Block's forward (activation checkpointing), with multi-head latent attention and
    a dense or MoE feed-forward."""

    def __init__(self, cfg: dict, layer_id: int):
        nn.Module.__init__(self)
        h, eps = cfg["hidden"], cfg.get("norm_eps", 1e-5)
        self.attention_norm = nn.RMSNorm(h, eps=eps)
        self.attention = Attention(cfg)
        self.ffn_norm = nn.RMSNorm(h, eps=eps)
        if layer_id < cfg["dense_layers"]:
            self.feed_forward = FeedForward(h, cfg["ffn_hidden"])
        else:
            self.moe = moe.MoE(h, cfg["moe_hidden"], cfg["experts"], cfg["shared_experts"], cfg["top_k"],
                               cfg["score_func"], FeedForward, cfg.get("expert_groups"),
                               cfg.get("limited_groups"), cfg.get("route_scale", 1.0),
                               bool(cfg.get("route_norm")), cfg.get("load_balance_coeff"))
        self.recompute = bool(cfg.get("recompute"))

    def _forward(self, x, positions):
        h = x + self.attention(self.attention_norm(x), positions)
        ffn = self.feed_forward if hasattr(self, "feed_forward") else self.moe
        return h + ffn(self.ffn_norm(h))


class Model(llama3.Model):
    """llama3.Model's forward (positions for context parallelism), stages and tying (none),
    with DeepSeek-V3's blocks."""

    def __init__(self, **cfg):
        nn.Module.__init__(self)
        self.tied = False
        self.positions = None  # the sequence places of the tokens this rank holds; None: all
        self.embed = nn.Embedding(cfg["vocab_size"], cfg["hidden"])
        self.layers = nn.ModuleDict({str(i): Block(cfg, i) for i in range(cfg["layers"])})
        self.head = llama3.Head(cfg["hidden"], cfg["vocab_size"], cfg.get("norm_eps", 1e-5))

    def tensor_parallel(self, tp_mesh) -> None:
        """After parallelize.py's plan: the attention's shared rotary key on tp_mesh."""
        for layer in self.layers.values():
            layer.attention.tp_mesh = tp_mesh


def parameter_count(cfg: dict) -> int:
    """The model's parameters, from a meta-device build."""
    with torch.device("meta"):
        return models.count_parameters(Model(**cfg))


def full_value(name: str, shape, seed: int, rows=None) -> torch.Tensor:
    """The single-device model's initial value of parameter `name` (torchtitan's deepseek_v3
    initialisation, normal in place of truncated normal): RMSNorm weights at one; the token
    embedding N(0, 1); the output layer N(0, hidden^-1/2); wo, the SwiGLUs' w2 and w3 (dense,
    shared and routed experts) and the router's gate N(0, 0.02 / sqrt(2 (layer + 1))); every
    other weight N(0, 0.02). A routed expert's weights are drawn expert by expert; `rows`: the
    experts a rank holds (all where None)."""
    std = llama3.init_std(name, shape, ("wo", "w2", "w3", "gate"))
    if std is None:
        return torch.ones(shape)
    if name.split(".")[-2] == "experts":
        ids = range(shape[0]) if rows is None else rows
        return torch.stack([seeded_normal(shape[1:], std, seed, f"{name}.{e}") for e in ids])
    return seeded_normal(shape, std, seed, name)


# ---- its split, its session and its GPU path ----------------------------------------------------
def tp_plan(model, sequence_parallel: bool) -> dict:
    """torchtitan's tensor-parallel plan of DeepSeek-V3 (its deepseek_v3 sharding): the
    attention's up-projections (wq or wq_b, wkv_b) by columns, wo by rows, the low-rank
    down-projections and their norms replicated; the dense and the shared experts' SwiGLU as
    Llama 3's; embedding and output as Llama 3's. The routed experts and the router are
    expert_parallel.py's. No sequence-parallel plan (contract/parallel.py refuses it)."""
    plan: dict[str, ParallelStyle] = {}
    if model.embed is not None:
        plan["embed"] = RowwiseParallel(input_layouts=Replicate(), output_layouts=Replicate())
    for i, layer in model.layers.items():
        p = f"layers.{i}"
        plan.update({f"{p}.attention.{'wq_b' if layer.attention.q_lora_rank else 'wq'}": ColwiseParallel(),
                     f"{p}.attention.wkv_b": ColwiseParallel(), f"{p}.attention.wo": RowwiseParallel()})
        ffn = f"{p}.feed_forward" if hasattr(layer, "feed_forward") else f"{p}.moe.shared_experts"
        if hasattr(layer, "feed_forward") or layer.moe.shared_experts is not None:
            plan.update({f"{ffn}.w1": ColwiseParallel(), f"{ffn}.w3": ColwiseParallel(),
                         f"{ffn}.w2": RowwiseParallel()})
    return {**plan, **parallelize.head_plan(model, "head.norm", False)}


def session(spec, dist):
    """torchtitan's model on GPUs, this definition on the CPU (frameworks/pytorch/titan/moe_session.py)."""
    from frameworks.pytorch.titan import moe_session as titan_moe
    return titan_moe.session(sys.modules[__name__], spec, dist)


def titan_config(cfg: dict, attn_backend: str):
    """torchtitan's model config of this shape (its builders; frameworks/pytorch/titan/moe_session.py)."""
    from torchtitan.models.common import ComplexRoPE, Embedding, Linear, RMSNorm
    from torchtitan.models.deepseek_v3 import (_EMBEDDING_INIT, _NORM_INIT, _build_dsv3_layers,
                                               _output_linear_init)
    from torchtitan.models.deepseek_v3.model import DeepSeekV3Model

    dim, vocab, yarn = cfg["hidden"], cfg["vocab_size"], cfg.get("rope_scaling") or {}
    rope = ComplexRoPE.Config(
        dim=cfg["qk_rope_head_dim"], max_seq_len=max(16384, cfg["seq_len"]), theta=cfg["rope_theta"],
        scaling="yarn" if yarn else "none", rope_factor=yarn.get("factor", 1.0),
        beta_fast=yarn.get("beta_fast", 32.0), beta_slow=yarn.get("beta_slow", 1.0),
        original_seq_len=yarn.get("original_seq_len", 4096))
    layers = _build_dsv3_layers(
        n_layers=cfg["layers"], n_dense_layers=cfg["dense_layers"], dim=dim, n_heads=cfg["heads"],
        q_lora_rank=cfg["q_lora_rank"], kv_lora_rank=cfg["kv_lora_rank"],
        qk_nope_head_dim=cfg["qk_nope_head_dim"], qk_rope_head_dim=cfg["qk_rope_head_dim"],
        v_head_dim=cfg["v_head_dim"], mscale=cfg["mscale"], dense_hidden_dim=cfg["ffn_hidden"],
        moe_hidden_dim=cfg["moe_hidden"], num_experts=cfg["experts"],
        num_shared_experts=cfg["shared_experts"], router_top_k=cfg["top_k"],
        router_score_func=cfg["score_func"], router_num_expert_groups=cfg.get("expert_groups"),
        router_num_limited_groups=cfg.get("limited_groups"),
        router_route_scale=cfg.get("route_scale", 1.0), router_route_norm=bool(cfg.get("route_norm")),
        attn_backend=attn_backend, moe_comm_backend=cfg.get("dispatch", "standard"),
        non_blocking_capacity_factor=None, rope=rope)
    eps = cfg.get("norm_eps", 1e-5)
    for layer in layers:
        for norm in (layer.attention_norm, layer.ffn_norm, layer.attention.kv_norm, layer.attention.q_norm):
            norm.eps = eps
    return DeepSeekV3Model.Config(
        vocab_size=vocab, dim=dim, layers=layers, mtp_layers=[],
        tok_embeddings=Embedding.Config(num_embeddings=vocab, embedding_dim=dim, param_init=_EMBEDDING_INIT),
        norm=RMSNorm.Config(normalized_shape=dim, eps=eps, param_init=_NORM_INIT),
        lm_head=Linear.Config(in_features=dim, out_features=vocab, param_init=_output_linear_init(dim)))
