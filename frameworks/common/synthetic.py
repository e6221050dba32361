"""The synthetic batch, the same values in every framework (numpy, which every
framework's environment has; the rest of frameworks/common is standard library only).

Made once per rank and seeded with seed + rank, as DLPerf's synthetic-data runs:
no input pipeline is measured. Each adapter turns the arrays into its own tensors.
"""
from contract import models


def mlm_count(model_cfg: dict) -> int:
    """How many positions of each sequence are masked: round(mask_prob * seq_len), at
    least 1, at most max_predictions_per_seq (and the seq_len - 1 non-special positions)."""
    s, p = model_cfg["seq_len"], int(model_cfg["max_predictions_per_seq"])
    if p < 1:
        raise ValueError(f"model.max_predictions_per_seq must be >= 1, got {p}")
    return min(p, max(1, round(model_cfg["mask_prob"] * s)), s - 1)


def arrays(model_cfg: dict, batch_size: int, seed: int, channels_last: bool = False,
           int_dtype: str = "int64"):
    """(inputs, labels) as tuples of numpy arrays of a model whose spec (contract/models/)
    says its batch holds images (ResNet-50) or masked tokens (BERT).

    images (resnet50): images (N, 3, H, W) float32, or (N, H, W, 3) with channels_last; class
    ids. masked tokens (bert_base), as the reference pretraining data (BERT's
    create_pretraining_data): inputs tokens, token types (second half 1), attention mask (all 1) and `masked_positions`
    (N, P), P = max_predictions_per_seq; labels `masked_ids` (N, P) and NSP labels.
    Each row's masked positions are distinct and sorted, drawn from the non-special
    positions 1..seq_len-1; there are `mlm_count` of them, and the row is padded to P with
    position 0 and label -100 (the ignore index of every adapter's MLM loss).
    """
    import numpy as np
    rng = np.random.default_rng(seed)
    inputs = models.get(model_cfg["name"]).inputs
    if inputs == models.IMAGES:
        n = model_cfg["image_size"]
        x = rng.standard_normal((batch_size, 3, n, n), dtype=np.float32)
        if channels_last:
            x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        y = rng.integers(0, model_cfg["num_classes"], batch_size)
        return (x,), (y.astype(int_dtype),)
    if inputs == models.MASKED_TOKENS:
        s, vocab = model_cfg["seq_len"], model_cfg["vocab_size"]
        p, count = int(model_cfg["max_predictions_per_seq"]), mlm_count(model_cfg)
        tokens = rng.integers(0, vocab, (batch_size, s))
        types = np.broadcast_to(np.arange(s) >= s // 2, (batch_size, s))
        mask = np.ones((batch_size, s))
        # `count` distinct positions of 1..s-1 per row (a random permutation's first ones).
        chosen = np.sort(rng.random((batch_size, s - 1)).argsort(axis=1)[:, :count] + 1, axis=1)
        positions = np.zeros((batch_size, p), dtype=np.int64)
        ids = np.full((batch_size, p), -100, dtype=np.int64)
        positions[:, :count] = chosen
        ids[:, :count] = rng.integers(0, vocab, (batch_size, count))
        nsp = rng.integers(0, 2, batch_size)
        ints = lambda *a: tuple(np.ascontiguousarray(v, dtype=int_dtype) for v in a)  # noqa: E731
        return ints(tokens, types, mask, positions), ints(ids, nsp)
    raise ValueError(f"no synthetic {inputs} batch here for model {model_cfg['name']!r}")
