"""DeepSeek-V3, a mixture of experts (conf/model/deepseek_v3.yaml, docs/moe.md): torchtitan's on
GPUs, the same definition on the CPU, at any layout, expert parallelism included. Its sizes:
torchtitan's 16B and 671B, `tiny` for the CPU, and `gpu1`, the 16B's own widths with 3 layers
(1 dense, 2 MoE): 1,670,135,296 parameters, which with AdamW's fp32 state load one 80 GB GPU
(the GPU check's MoE stage).

FLOPs on its activated parameters by the suite's one convention (contract/flops.py,
docs/flops.md), on the terms of NeMo's flops_formulas.deepseekv3 (whose figure
dgxc-benchmarking's TFLOPS_per_GPU and MFU are): per token of a sequence of s tokens, with l
layers of which d dense, hidden h, H heads, the MLA's ranks q_r (0: one query projection) and
kv_r, head dims n (no position), r (rotary) and v, the dense SwiGLU f wide, experts m wide, k
routed and S shared per token, vocabulary V, and T multi-token-prediction layers:

    attention   3 H (n + r + v) (s + 1) (l + T)          the causal pairs, s (s + 1) / 2 a head
    MLA         6 (l + T) [h q_r + q_r H (n + r)  (or h H (n + r) without q_r)
                           + h r + h kv_r + kv_r H (n + v) + H v h]
    SwiGLUs     6 [d 3 h f + (l - d + T) 3 h m (S + k)]  the k routed experts a token uses
    output      6 V h (1 + T) + 6 T 2 h^2                MTP's own output and projection

norms, the router and the embedding left out. NeMo counts s / 2 keys a query where the causal
pairs are (s + 1) / 2 (`nemo_flops_per_token`, the spec's `published_flops`): 671B at 4096
with T = 1 (dgxc-benchmarking's NeMo recipe), 259,992,059,904 a token in NeMo's count, and its
1,024-H100 run's 629.67 tokens/s per GPU times that is its published 163.7 TFLOP/s per GPU;
259,999,678,464 in ours (0.003% more). The suite's models train without MTP
(T = `mtp_layers`, 0). torchtitan counts the same model otherwise (6 x its activated
parameters, norms and router included, + 6 l H (n + r + v) s, no causal halving:
281,158,232,064 at 671B); `parameters` gives its totals: every parameter, and the activated
ones (the dense ones, the router, the shared experts, k / E of the routed).
"""
from typing import Any

from contract import flops
from contract.models import TOKENS, Model, ModelSpec


def _mla(h: int, heads: int, q_lora_rank: int | None, kv_lora_rank: int, qk_nope_head_dim: int,
         qk_rope_head_dim: int, v_head_dim: int) -> int:
    """One layer's multi-head latent attention projections (weights only)."""
    qk = qk_nope_head_dim + qk_rope_head_dim
    q = h * q_lora_rank + q_lora_rank * heads * qk if q_lora_rank else h * heads * qk
    return (q + h * (kv_lora_rank + qk_rope_head_dim)
            + kv_lora_rank * heads * (qk_nope_head_dim + v_head_dim) + heads * v_head_dim * h)


def _mla_shape(model: Model) -> tuple[Any, ...]:
    return tuple(model[k] for k in ("hidden", "heads", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
                                    "qk_rope_head_dim", "v_head_dim"))


def parameters(model: Model) -> dict[str, int]:
    """{total, active, embedding, routed}: every parameter (norms, router and embedding
    included, as torchtitan counts them), the activated ones (module docstring), the token
    embedding's, the routed experts' (all of them)."""
    h, layers, dense, E, k = (model[x] for x in ("hidden", "layers", "dense_layers", "experts", "top_k"))
    norms = 2 * h + (model["q_lora_rank"] or 0) + model["kv_lora_rank"]   # block's two, q_norm, kv_norm
    attention = _mla(*_mla_shape(model)) + norms
    routed = 3 * E * model["moe_hidden"] * h
    moe = routed + E * h + 3 * h * model["moe_hidden"] * model["shared_experts"]
    embedding = model["vocab_size"] * h
    total = layers * attention + dense * 3 * h * model["ffn_hidden"] + (layers - dense) * moe \
        + h + 2 * embedding
    active = total - (layers - dense) * (routed - routed * k // E)
    return {"total": total, "active": active, "embedding": embedding, "routed": (layers - dense) * routed}


def flops_per_token(model: Model, mtp_layers: int | None = None) -> int:
    """Training FLOPs of one token by the suite's convention (module docstring): the causal
    pairs' scores and values a token, 6 H (n + r + v) s (s + 1) / 2 / s (exact), a layer;
    `mtp_layers`: T, the model's own (0 where unsaid) unless given."""
    s, heads = model["seq_len"], model["heads"]
    n, r, v = model["qk_nope_head_dim"], model["qk_rope_head_dim"], model["v_head_dim"]
    return _per_token(model, mtp_layers, flops.attention(flops.pairs(s), heads, n + r, v) // s)


def nemo_flops_per_token(model: Model, mtp_layers: int | None = None) -> int:
    """NeMo's count of one token (dgxc-benchmarking's published figures'): s / 2 keys a
    query, 3 H (n + r + v) s a layer."""
    heads, n, r, v = model["heads"], model["qk_nope_head_dim"], model["qk_rope_head_dim"], model["v_head_dim"]
    return _per_token(model, mtp_layers, 3 * heads * (n + r + v) * model["seq_len"])


def _per_token(model: Model, mtp_layers: int | None, attention_per_layer: int) -> int:
    T = (model.get("mtp_layers") or 0) if mtp_layers is None else mtp_layers
    h, layers, dense = model["hidden"], model["layers"], model["dense_layers"]
    attention = attention_per_layer * (layers + T)
    swiglus = dense * 3 * h * model["ffn_hidden"] \
        + (layers - dense + T) * 3 * h * model["moe_hidden"] * (model["shared_experts"] + model["top_k"])
    linear = 6 * (_mla(*_mla_shape(model)) * (layers + T) + swiglus)
    output = 6 * model["vocab_size"] * h * (1 + T) + 6 * T * 2 * h * h
    return int(attention + linear + output)


def flops_per_sample(model: Model) -> int:
    return flops_per_token(model) * int(model["seq_len"])


def nemo_flops_per_sample(model: Model) -> int:
    return nemo_flops_per_token(model) * int(model["seq_len"])


SPEC = ModelSpec(
    name="deepseek_v3",
    pytorch_session="frameworks.pytorch.models.deepseek_v3:session",
    flops=flops_per_sample,
    flops_keys=("seq_len", "layers", "hidden", "heads", "kv_lora_rank", "qk_nope_head_dim",
                "qk_rope_head_dim", "v_head_dim", "moe_hidden", "experts", "top_k", "vocab_size"),
    published_flops=nemo_flops_per_sample,
    language_model=True, experts=True, layouts=("tp", "pp", "fsdp", "cp", "ep"), tp_divides=("heads",),
    report="moe", published=("deepseek_v3",), inputs=TOKENS)
