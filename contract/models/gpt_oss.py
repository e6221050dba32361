"""GPT-OSS, OpenAI's mixtures of experts (conf/model/gpt_oss.yaml, docs/moe.md): torchtitan's on
GPUs, the same definition on the CPU, expert parallelism and FSDP as DeepSeek-V3's. Its sizes:
OpenAI's 20b and 120b, `tiny` for the CPU, and `gpu1`, the 20b's own widths with 2 layers (one
sliding, one full) at 4096: 2,804,643,712 parameters, which with AdamW's fp32 state load one
80 GB GPU.

FLOPs on the activated parameters by the suite's one convention (contract/flops.py,
docs/flops.md: a multiply-add 2, training 3 x forward, attention as it runs; norms, router,
biases, the sinks and the embedding left out), with GPT-OSS's attention counted as it runs: the even layers (0, 2, ...)
attend over a sliding window of w keys, the odd ones over the whole causal prefix. A query at
place p scores min(w, p + 1) keys (w = s in a full layer), so a sequence of s tokens scores

    K(s, w) = sum over p < s of min(w, p + 1) = w s - w (w - 1) / 2   (w < s),  s (s + 1) / 2  (w >= s)

query-key pairs per head and layer (contract/flops.py's `pairs`), each 2 d FLOPs for q.k and 2 d for the value, x 3:

    attention  12 H d [ceil(l / 2) K(s, w) + floor(l / 2) K(s, s)]        per sequence
    linear     6 s [l (2 h H d + 2 h k_v d + 3 h f k) + V h]              per sequence

for l layers, hidden h, H query and k_v key-value heads of width d, experts f wide (their fused
gate-and-linear projection 2 f x h and the output f x h: 3 h f), k of them per token, vocabulary
V. 20B at 8192 (w 128): 24,120,709,632 a token. torchtitan 0.3.0 counts every layer's full
s x s (6 l H 2 d s, no window, no causal halving) on 6 x its activated parameters:
31,313,520,000 a token, 30% more; its fix (its pull request 4300) counts the window but not the
causal half: 26,557,179,264, 10% more than this (at its test's 4096, 26,481,681,792 ->
24,141,260,160, the "-8.8%" it reports).
`parameters`: every parameter and the activated ones (less the routed experts a token does not
use); OpenAI's "active parameters" (3.61B, 5.13B) are those less the token embedding.
"""
from contract import flops
from contract.models import TOKENS, Model, ModelSpec


def sliding_layers(layers: int) -> int:
    """The layers with a sliding window: the even ones, 0, 2, ... (torchtitan's, OpenAI's)."""
    return (layers + 1) // 2


def parameters(model: Model) -> dict[str, int]:
    """{total, active, embedding, routed} of a GPT-OSS shape: the attention's projections
    with their biases and the sinks (one a head), two norms, the router (with its bias), the
    experts (their biases included), the final norm, the embedding and the output layer."""
    h, layers, E, k, f = (model[x] for x in ("hidden", "layers", "experts", "top_k", "moe_hidden"))
    q, kv = model["heads"] * model["head_dim"], model["kv_heads"] * model["head_dim"]
    attention = 2 * h * q + 2 * h * kv + q + 2 * kv + h + model["heads"]
    expert = 3 * h * f + 2 * f + h
    embedding = model["vocab_size"] * h
    total = layers * (attention + 2 * h + E * h + E + E * expert) + h + 2 * embedding
    return {"total": total, "active": total - layers * (E - k) * expert, "embedding": embedding,
            "routed": layers * E * expert}


def flops_per_sample(model: Model) -> int:
    """Training FLOPs of one sequence (module docstring)."""
    h, layers, s, d = (model[x] for x in ("hidden", "layers", "seq_len", "head_dim"))
    heads, slide = model["heads"], sliding_layers(model["layers"])
    linear = 2 * h * heads * d + 2 * h * model["kv_heads"] * d + 3 * h * model["moe_hidden"] * model["top_k"]
    pairs = slide * flops.pairs(s, model["sliding_window"]) + (layers - slide) * flops.pairs(s)
    return int(6 * s * (layers * linear + model["vocab_size"] * h) + flops.attention(pairs, heads, d, d))


SPEC = ModelSpec(
    name="gpt_oss", pytorch_session="frameworks.pytorch.models.gpt_oss:session",
    flops=flops_per_sample,
    flops_keys=("seq_len", "layers", "hidden", "heads", "kv_heads", "head_dim", "moe_hidden", "experts",
                "top_k", "sliding_window", "vocab_size"),
    language_model=True, experts=True, layouts=("tp", "pp", "fsdp", "ep"),
    tp_divides=("heads", "kv_heads"), report="moe", published=("gpt_oss",), inputs=TOKENS)
