"""Llama 3 (conf/model/llama3.yaml, docs/llama3.md): torchtitan's on GPUs, the same definition
on the CPU, at any layout of data, tensor, pipeline and context parallelism, FSDP and sequence
parallelism.

FLOPs by the suite's one convention (contract/flops.py, docs/flops.md): per sequence of s tokens

    6 N s + 12 l h s (s + 1) / 2     N: the parameters less the token embedding (the output
                                     layer counts: it is a matmul; a tied one is counted once,
                                     as torchtitan counts it); 12 l h s (s + 1) / 2: the
                                     attention's scores and values over the causal pairs,
                                     2 matmuls x 2 FLOPs x 3 (forward and backward) x l h a pair

and no recompute term. torchtitan, PaLM (Chowdhery et al. 2022, appendix B) and
dgxc-benchmarking count the full s x s instead, 6 N + 12 l h s a token (`palm_flops_per_sample`;
dgxc-benchmarking's 4.74E+14 FLOPs per 8B sequence of 8192): the spec's `published_flops`, so
the report sets our MFU in their count beside theirs. N from the shape (`parameters`): per layer
2h^2 + 2 h k d (wq, wo; wk, wv with k key-value heads of d = h / heads) + 3 h f (SwiGLU, f
wide) + 2h (RMSNorms), a final RMSNorm h, the embedding V h and an untied output V h.
"""
from typing import Any

from contract import flops
from contract.models import TOKENS, Model, ModelSpec


def parameters(layers: int, hidden: int, heads: int, kv_heads: int, ffn_hidden: int, vocab_size: int,
               tie_embeddings: bool = False, **_: Any) -> dict[str, int]:
    """{total, embedding, non_embedding} parameters of a Llama 3 shape (module docstring)."""
    L, h, f, V = layers, hidden, ffn_hidden, vocab_size
    kv = kv_heads * (hidden // heads)
    per_layer = 2 * h * h + 2 * h * kv + 3 * h * f + 2 * h
    total = L * per_layer + h + V * h + (0 if tie_embeddings else V * h)
    embedding = 0 if tie_embeddings else V * h   # tied: the one matrix is the output layer too
    return {"total": total, "embedding": embedding, "non_embedding": total - embedding}


def flops_per_sample(model: Model) -> int:
    """6 N s + 12 l h s (s + 1) / 2: training FLOPs of one sequence (module docstring)."""
    s, h, heads = model["seq_len"], model["hidden"], model["heads"]
    n = parameters(**model)["non_embedding"]
    return int(6 * n * s + model["layers"] * flops.attention(flops.pairs(s), heads, h // heads, h // heads))


def palm_flops_per_sample(model: Model) -> int:
    """(6 N + 12 l h s) s: PaLM's, torchtitan's and dgxc-benchmarking's count, the full s x s
    scores (their published MFU's)."""
    n = parameters(**model)["non_embedding"]
    return int((6 * n + 12 * model["layers"] * model["hidden"] * model["seq_len"]) * model["seq_len"])


SPEC = ModelSpec(
    name="llama3", pytorch_session="frameworks.pytorch.models.llama3:session",
    flops=flops_per_sample,
    flops_keys=("seq_len", "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab_size"),
    published_flops=palm_flops_per_sample,
    language_model=True, layouts=("tp", "pp", "fsdp", "cp", "sp"), tp_divides=("heads", "kv_heads"),
    report="llama", published=("llama3", "llama3.1"), inputs=TOKENS, checkpoint=True)
