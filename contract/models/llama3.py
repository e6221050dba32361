"""Llama 3 (conf/model/llama3.yaml, docs/llama3.md): torchtitan's on GPUs, the same definition
on the CPU, at any layout of data, tensor, pipeline and context parallelism, FSDP and sequence
parallelism.

FLOPs by the formula torchtitan, PaLM (Chowdhery et al. 2022, appendix B) and
dgxc-benchmarking use (docs/flops.md): per token of a sequence of s tokens,

    6 N + 12 l h s           N: the parameters less the token embedding (the output layer
                             counts: it is a matmul; a tied one is counted once, as
                             torchtitan counts it); 12 l h s: attention scores and values,
                             2 matmuls x 2 FLOPs x 3 (forward and backward) x l h s

with no causal halving: the attention term counts the full s x s scores, as torchtitan's
get_dense_model_nparams_and_flops and PaLM do and as dgxc-benchmarking's published MFU does
(its 4.74E+14 FLOPs per 8B sequence of 8192 is this count), so our MFU and theirs are the
same ratio. Activation recomputation adds nothing: MFU counts the model's FLOPs, not the
hardware's (PaLM's MFU against HFU). N from the shape (`parameters`): per layer 2h^2 + 2 h k d
(wq, wo; wk, wv with k key-value heads of d = h / heads) + 3 h f (SwiGLU, f wide) + 2h
(RMSNorms), a final RMSNorm h, the embedding V h and an untied output V h.
"""
from typing import Any

from contract.models import Model, ModelSpec, TOKENS


def parameters(layers: int, hidden: int, heads: int, kv_heads: int, ffn_hidden: int, vocab_size: int,
               tie_embeddings: bool = False, **_: Any) -> dict[str, int]:
    """{total, embedding, non_embedding} parameters of a Llama 3 shape (module docstring)."""
    L, h, f, V = layers, hidden, ffn_hidden, vocab_size
    kv = kv_heads * (hidden // heads)
    per_layer = 2 * h * h + 2 * h * kv + 3 * h * f + 2 * h
    total = L * per_layer + h + V * h + (0 if tie_embeddings else V * h)
    embedding = 0 if tie_embeddings else V * h   # tied: the one matrix is the output layer too
    return {"total": total, "embedding": embedding, "non_embedding": total - embedding}


def flops_per_token(model: Model) -> int:
    """6 N + 12 l h s: training FLOPs of one token (module docstring; no causal halving)."""
    n = parameters(**model)["non_embedding"]
    return int(6 * n + 12 * model["layers"] * model["hidden"] * model["seq_len"])


def flops_per_sample(model: Model) -> int:
    return flops_per_token(model) * int(model["seq_len"])


SPEC = ModelSpec(
    name="llama3", frameworks=("pytorch",), pytorch_session="frameworks.pytorch.models.llama3:session",
    flops=flops_per_sample,
    flops_keys=("seq_len", "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab_size"),
    language_model=True, layouts=("tp", "pp", "fsdp", "cp", "sp"), tp_divides=("heads", "kv_heads"),
    report="llama", published=("llama3", "llama3.1"), inputs=TOKENS, checkpoint=True)
