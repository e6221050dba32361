"""DLPerf's GPT (conf/model/gpt.yaml; conf/gpt_case/): a Megatron-style decoder at any layout
of data, tensor and pipeline parallelism, FSDP and sequence parallelism (docs/layouts.md).

FLOPs after Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters
Using Megatron-LM" (SC'21), section 5.1 (docs/flops.md). With B sequences of s tokens, l layers,
hidden h, vocabulary V, one layer's forward pass is

    QKV projection 6Bsh^2 + attention scores 2Bs^2h + scores x values 2Bs^2h
    + output projection 2Bsh^2 + MLP (h -> 4h -> h) 16Bsh^2 = 24Bsh^2 + 4Bs^2h

and the output layer (logits) 2BshV. Without activation recomputation an iteration is
3 x forward:

    F = 72 B s l h^2 (1 + s/(6h) + V/(12 l h))

With it (`model.recompute=true`) the paper's better-known F = 96 B s l h^2 (1 + s/(6h) +
V/(16 l h)): the extra forward pass of the layers that full recomputation runs (4 x the
layers, 3 x the logits). That is the model's count, as the paper counts it; PyTorch's
checkpoint skips recomputing what backward does not need (the MLP's last layer), so the
hardware does a little less (tests/unit/test_flops.py). V is the vocabulary the model holds,
padded where it is (contract/parallel.py's padded_vocab).
"""
from contract.models import Model, ModelSpec, TOKENS

SHAPE = ("seq_len", "layers", "hidden", "vocab_size")


def flops_per_iteration(batch: int, seq_len: int, layers: int, hidden: int, vocab: int,
                        recompute: bool = False) -> int:
    """Megatron's count for one training iteration of `batch` sequences (exact integers)."""
    B, s, L, h, V = batch, seq_len, layers, hidden, vocab
    forward_layers = L * (24 * B * s * h * h + 4 * B * s * s * h)
    logits = 2 * B * s * h * V
    return (4 if recompute else 3) * forward_layers + 3 * logits


def flops_per_sample(model: Model) -> int:
    """One sequence; with activation recomputation (`model.recompute`) the paper's extra
    forward pass of the layers counts too, as Narayanan et al. count it."""
    seq_len, layers, hidden, vocab = (model[k] for k in SHAPE)
    return flops_per_iteration(1, seq_len, layers, hidden, vocab, recompute=bool(model.get("recompute")))


SPEC = ModelSpec(
    name="gpt", frameworks=("pytorch",), pytorch_session="frameworks.pytorch.models.gpt:session",
    flops=flops_per_sample, flops_keys=SHAPE, language_model=True,
    layouts=("tp", "pp", "fsdp", "sp"), tp_divides=("heads",),
    report="gpt", published=("gpt",), metric="tokens_per_s", compare_keys=("seq_len",),
    inputs=TOKENS, checkpoint=True)
