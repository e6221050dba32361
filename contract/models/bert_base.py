"""BERT-base pretraining, MLM + NSP (conf/model/bert_base.yaml): every framework's, data=files.

FLOPs (docs/flops.md), per sequence of s tokens, hidden h, l layers, intermediate I,
vocabulary V, P masked positions:

    layers   l * (8*s*h^2 + 4*s*h*I + 4*s^2*h)     QKV 6sh^2, scores 2s^2h, x values 2s^2h,
                                                   output 2sh^2, feed-forward 4shI
    pooler + NSP            2*h^2 + 4*h            on the [CLS] position only
    MLM head   P * (2*h^2 + 2*h*V)                 transform and the tied decoder

with P = the model's `max_predictions_per_seq` (20 when absent): the MLM head runs on the
gathered masked positions only, as the reference scripts do. Counting it on all s positions
instead (`predictions=None`) adds (s - P) * (2h^2 + 2hV): 5.19 GFLOPs forward per sequence of
BERT-base at s = 128. Training = 3 x forward.
"""
from contract.models import MASKED_TOKENS, Model, ModelSpec

DEFAULT_MAX_PREDICTIONS = 20   # masked positions per sequence at seq 128 (conf/model/bert_base.yaml)
SHAPE = ("seq_len", "hidden", "layers", "intermediate", "vocab_size")


def forward_flops(seq_len: int, hidden: int, layers: int, intermediate: int, vocab_size: int,
                  predictions: int | None = None) -> int:
    """Forward FLOPs of one sequence (module docstring); the MLM head on `predictions`
    positions (the gathered masked ones), or on all seq_len positions when None."""
    s, h, L, i, v = seq_len, hidden, layers, intermediate, vocab_size
    p = s if predictions is None else min(int(predictions), s)
    encoder = L * (8 * s * h * h + 4 * s * h * i + 4 * s * s * h)
    pooler_nsp = 2 * h * h + 2 * h * 2
    mlm = p * (2 * h * h + 2 * h * v)
    return encoder + pooler_nsp + mlm


def predictions(model: Model) -> int:
    """Masked positions per sequence the MLM head runs on: `max_predictions_per_seq`, 20
    when the model config has none."""
    p = model.get("max_predictions_per_seq")
    return DEFAULT_MAX_PREDICTIONS if p is None else int(p)


def flops_per_sample(model: Model, gathered: bool = True) -> int:
    """Training FLOPs of one sequence: 3 x forward; `gathered=False`: the MLM head on all
    positions (the count before the gather, for comparison)."""
    seq_len, hidden, layers, intermediate, vocab_size = (model[k] for k in SHAPE)
    return 3 * forward_flops(seq_len, hidden, layers, intermediate, vocab_size,
                             predictions=predictions(model) if gathered else None)


SPEC = ModelSpec(
    name="bert_base",
    pytorch_session="frameworks.pytorch.models.bert_base:session",
    flops=flops_per_sample, flops_keys=SHAPE,
    inputs=MASKED_TOKENS, files=True, checkpoint=True)
