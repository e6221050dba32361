"""DLPerf's GPT (conf/model/gpt.yaml; conf/gpt_case/): a Megatron-style decoder at any layout
of data, tensor and pipeline parallelism, FSDP and sequence parallelism (docs/layouts.md).

FLOPs by the suite's one convention (contract/flops.py, docs/flops.md), on Narayanan et al.'s
terms ("Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", SC'21,
section 5.1). A sequence of s tokens, l layers, hidden h, vocabulary V: a layer's projections
(QKV 6sh^2, output 2sh^2, MLP h -> 4h -> h 16sh^2) 24sh^2 forward, its scores and values 4h
a causal query-key pair, s (s + 1) / 2 of them, the logits 2shV; training 3 x forward:

    F = 72 s l h^2 + 12 l h s (s + 1) / 2 + 6 s h V          (`flops_per_sample`)

with no recompute term. Megatron's own count, which DLPerf's published TFLOP/s use
(`flops_per_iteration`, the spec's `published_flops`), takes the full s x s scores and, with
activation recomputation (`model.recompute=true`), the recomputed forward of the layers:
72 B s l h^2 (1 + s/(6h) + V/(12 l h)) an iteration of B sequences, 96 B s l h^2 (1 + s/(6h) +
V/(16 l h)) with it (4 x the layers, 3 x the logits). V is the vocabulary the model holds,
padded where it is (contract/parallel.py's padded_vocab).
"""
from contract import flops
from contract.models import TOKENS, Model, ModelSpec

SHAPE = ("seq_len", "layers", "hidden", "vocab_size")


def flops_per_iteration(batch: int, seq_len: int, layers: int, hidden: int, vocab: int,
                        recompute: bool = False) -> int:
    """Megatron's count for one training iteration of `batch` sequences (exact integers): the
    full s x s scores, and the recomputed forward with `recompute` (DLPerf's published count)."""
    B, s, L, h, V = batch, seq_len, layers, hidden, vocab
    forward_layers = L * (24 * B * s * h * h + 4 * B * s * s * h)
    logits = 2 * B * s * h * V
    return (4 if recompute else 3) * forward_layers + 3 * logits


def flops_per_sample(model: Model) -> int:
    """72 s l h^2 + 12 l h s (s + 1) / 2 + 6 s h V: one sequence by the suite's convention
    (module docstring); `model.recompute` changes nothing."""
    s, L, h, V = (int(model[k]) for k in SHAPE)
    # the heads together: H heads of h / H are one head of h to the count
    return 72 * s * L * h * h + L * flops.attention(flops.pairs(s), 1, h, h) + 6 * s * h * V


def megatron_flops_per_sample(model: Model) -> int:
    """One sequence by Megatron's count: the full s x s, and with `model.recompute` the
    recomputed forward, as Narayanan et al. and DLPerf count it."""
    seq_len, layers, hidden, vocab = (int(model[k]) for k in SHAPE)
    return flops_per_iteration(1, seq_len, layers, hidden, vocab, recompute=bool(model.get("recompute")))


SPEC = ModelSpec(
    name="gpt", pytorch_session="frameworks.pytorch.models.gpt:session",
    flops=flops_per_sample, flops_keys=SHAPE, language_model=True,
    published_flops=megatron_flops_per_sample,
    layouts=("tp", "pp", "fsdp", "sp"), tp_divides=("heads",),
    report="gpt", published=("gpt",), metric="tokens_per_s", compare_keys=("seq_len",),
    inputs=TOKENS, checkpoint=True)
