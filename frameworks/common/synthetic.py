"""The synthetic batch, the same values in every framework (numpy, which every
framework's environment has; the rest of frameworks/common is standard library only).

Made once per rank and seeded with seed + rank, as DLPerf's synthetic-data runs:
no input pipeline is measured. Each adapter turns the arrays into its own tensors.
"""


def arrays(model_cfg: dict, batch_size: int, seed: int, channels_last: bool = False,
           int_dtype: str = "int64"):
    """(inputs, labels) as tuples of numpy arrays for resnet50 or bert_base.

    resnet50: images (N, 3, H, W) float32, or (N, H, W, 3) with channels_last; class ids.
    bert_base: tokens, token types (second half 1), attention mask (all 1); MLM labels
    (-100 where not masked; ~mask_prob of positions masked, at least position 1) and
    NSP labels.
    """
    import numpy as np
    rng = np.random.default_rng(seed)
    name = model_cfg["name"]
    if name == "resnet50":
        n = model_cfg["image_size"]
        x = rng.standard_normal((batch_size, 3, n, n), dtype=np.float32)
        if channels_last:
            x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        y = rng.integers(0, model_cfg["num_classes"], batch_size)
        return (x,), (y.astype(int_dtype),)
    if name == "bert_base":
        s, vocab = model_cfg["seq_len"], model_cfg["vocab_size"]
        tokens = rng.integers(0, vocab, (batch_size, s))
        types = np.broadcast_to(np.arange(s) >= s // 2, (batch_size, s))
        mask = np.ones((batch_size, s))
        masked = rng.random((batch_size, s)) < model_cfg["mask_prob"]
        masked[:, 1] = True
        mlm = np.where(masked, rng.integers(0, vocab, (batch_size, s)), -100)
        nsp = rng.integers(0, 2, batch_size)
        ints = lambda *a: tuple(np.ascontiguousarray(v, dtype=int_dtype) for v in a)  # noqa: E731
        return ints(tokens, types, mask), ints(mlm, nsp)
    raise ValueError(f"unknown model {name!r}")
