"""The one FLOP convention of every model's count (docs/flops.md, "Conventions"), written once;
each model's count (contract/models/<name>.py) applies it. Standard library only.

Model FLOPs are the matrix products the model's definition needs for one training step, a
multiply-add 2 FLOPs, training 3 x forward (the gradients of the activations and of the
weights each cost a forward):

- attention as it runs: a query scores the keys its mask leaves, its own included; causal
  attention over s tokens scores s (s + 1) / 2 query-key pairs a head, a sliding window of
  w keys w s - w (w - 1) / 2 (`pairs`); each pair costs 2 d_qk FLOPs for q.k and 2 d_v for
  the value forward (`attention`). The full s x s that PaLM, torchtitan and Megatron count
  is work a causal kernel skips, and counting it would make MFU reward nothing done;
- no activation recomputation: a recomputed forward is work the hardware does again, not
  work the model needs (PaLM's MFU against its HFU), so `model.recompute` changes no count.

Where a published figure counts otherwise (torchtitan's and dgxc-benchmarking's Llama 3: the
full s x s; Megatron's GPT and DLPerf: the full s x s and the recomputed forward; NeMo's
DeepSeek-V3: s / 2 keys a query), the model's spec gives that count too (`published_flops`),
so the report sets our figure in their convention beside theirs.
"""

MULTIPLY_ADD = 2      # FLOPs
TRAINING = 3          # x forward


def pairs(seq_len: int, window: int | None = None) -> int:
    """Query-key pairs one head of one layer scores over a sequence of `seq_len` tokens:
    sum over places p < s of min(w, p + 1); causal (no window, or w >= s): s (s + 1) / 2."""
    s = seq_len
    w = s if window is None else min(window, s)
    return w * s - w * (w - 1) // 2


def attention(pair_count: int, heads: int, qk_dim: int, v_dim: int) -> int:
    """Training FLOPs of one layer's scores and weighted values over `pair_count` query-key
    pairs a head: 3 x 2 x (d_qk + d_v) a pair and head."""
    return TRAINING * MULTIPLY_ADD * heads * (qk_dim + v_dim) * pair_count
