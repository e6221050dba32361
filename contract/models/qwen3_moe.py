"""Qwen3's mixtures of experts (conf/model/qwen3_moe.yaml, docs/moe.md): torchtitan's on GPUs,
the same definition on the CPU, at any layout, expert parallelism included. Its sizes:
torchtitan's 30B-A3B and 235B-A22B, `tiny` for the CPU, and `gpu1`, the 30B-A3B's own widths with
2 layers: 1,868,573,184 parameters, which with AdamW's fp32 state load one 80 GB GPU.

FLOPs by the suite's one convention (contract/flops.py, docs/flops.md) on DeepSeek-V3's terms
(contract/models/deepseek_v3.py), with its shapes (H heads and k_v key-value heads of width d,
every layer a MoE of m-wide experts, k per token, no shared one), per token: 3 H 2 d (s + 1) l
(the causal pairs' scores and values, s (s + 1) / 2 a head) + 6 l [h H d + 2 h k_v d + H d h +
3 h m k] + 6 V h. (NeMo's qwen3 formula takes H d = h, which Qwen3's MoE sizes are not: 32 x
128 at 2048.)
"""
from contract import flops
from contract.models import TOKENS, Model, ModelSpec


def parameters(model: Model) -> dict[str, int]:
    """{total, active, embedding, routed} of a Qwen3 MoE shape (DeepSeek-V3's definitions)."""
    h, layers, E, k, d = (model[x] for x in ("hidden", "layers", "experts", "top_k", "head_dim"))
    attention = 2 * h * model["heads"] * d + 2 * h * model["kv_heads"] * d + 2 * d   # wq, wo; wk, wv; q/k norms
    routed = 3 * E * model["moe_hidden"] * h
    embedding = model["vocab_size"] * h
    total = layers * (attention + 2 * h + E * h + routed) + h + 2 * embedding
    active = total - layers * (routed - routed * k // E)
    return {"total": total, "active": active, "embedding": embedding, "routed": layers * routed}


def flops_per_token(model: Model) -> int:
    """Training FLOPs of one token (module docstring; the causal pairs' a token exact)."""
    h, layers, s, heads, d = (model[x] for x in ("hidden", "layers", "seq_len", "heads", "head_dim"))
    linear = 2 * h * heads * d + 2 * h * model["kv_heads"] * d + 3 * h * model["moe_hidden"] * model["top_k"]
    attention = flops.attention(flops.pairs(s), heads, d, d) // s
    return int(attention * layers + 6 * layers * linear + 6 * model["vocab_size"] * h)


def flops_per_sample(model: Model) -> int:
    return flops_per_token(model) * int(model["seq_len"])


SPEC = ModelSpec(
    name="qwen3_moe", pytorch_session="frameworks.pytorch.models.qwen3_moe:session",
    flops=flops_per_sample,
    flops_keys=("seq_len", "layers", "hidden", "heads", "kv_heads", "head_dim", "moe_hidden", "experts",
                "top_k", "vocab_size"),
    language_model=True, experts=True, layouts=("tp", "pp", "fsdp", "cp", "ep"),
    tp_divides=("heads", "kv_heads"), report="moe", published=("qwen3_moe",), inputs=TOKENS)
