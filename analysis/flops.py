"""FLOP counts and device peaks, written once (docs/special.md), tested against hand figures.

GPT (Megatron-style decoder), per training iteration, counting a multiply-add as 2 FLOPs,
after Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters
Using Megatron-LM" (SC'21), section 5.1. With B sequences of s tokens, l layers, hidden h,
vocabulary V, one layer's forward pass is

    QKV projection 6Bsh^2 + attention scores 2Bs^2h + scores x values 2Bs^2h
    + output projection 2Bsh^2 + MLP (h -> 4h -> h) 16Bsh^2 = 24Bsh^2 + 4Bs^2h

and the output layer (logits) 2BshV. The backward pass costs twice the forward, so without
activation recomputation (this suite recomputes nothing) an iteration is 3 x forward:

    F = 72 B s l h^2 (1 + s/(6h) + V/(12 l h))

The paper's better-known F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) adds the extra forward
pass of the layers that full recomputation runs (4 x the layers, 3 x the logits).
LayerNorm, softmax, GELU, dropout, embedding lookups and biases are left out, as there.
"""

# Dense (no sparsity) peak TFLOP/s from NVIDIA's datasheets; first matching name wins.
# fp32 runs use TF32 matrix maths on these (frameworks/pytorch/session.py), so fp32 -> tf32.
PEAKS = (
    ("H100 PCIe", {"bf16": 756.0, "fp16": 756.0, "tf32": 378.0}),
    ("GH200", {"bf16": 989.0, "fp16": 989.0, "tf32": 494.5}),
    ("H200", {"bf16": 989.0, "fp16": 989.0, "tf32": 494.5}),
    ("H100", {"bf16": 989.0, "fp16": 989.0, "tf32": 494.5}),   # SXM: 1,979 with sparsity
    ("A100", {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0}),
)


def gpt_flops_per_iteration(batch, seq_len, layers, hidden, vocab, recompute=False) -> int:
    """Megatron's count for one training iteration of `batch` sequences (exact integers)."""
    B, s, l, h, V = batch, seq_len, layers, hidden, vocab
    forward_layers = l * (24 * B * s * h * h + 4 * B * s * s * h)
    logits = 2 * B * s * h * V
    return (4 if recompute else 3) * forward_layers + 3 * logits


def megatron_formula(batch, seq_len, layers, hidden, vocab, recompute=False) -> float:
    """The paper's factored form, for checking the count above."""
    B, s, l, h, V = batch, seq_len, layers, hidden, vocab
    if recompute:
        return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
    return 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))


def flops_per_sample(model: dict):
    """Training FLOPs of one sample (sequence) of a model spec, or None where none is known."""
    keys = ("seq_len", "layers", "hidden", "vocab_size")
    if model.get("name") == "gpt" and all(model.get(k) for k in keys):
        return gpt_flops_per_iteration(1, *(model[k] for k in keys))
    return None


def achieved_tflops_per_device(samples_per_s, flops_sample, devices):
    """Model FLOPs done per second per device, in TFLOP/s."""
    if not samples_per_s or not flops_sample or not devices:
        return None
    return samples_per_s * flops_sample / devices / 1e12


def peak_tflops(device, precision, amp_dtype=None, override=None):
    """The device's dense peak for the run's precision, `override` if given, else None."""
    if override:
        return float(override)
    if not device:
        return None
    kind = (amp_dtype or "bf16") if precision == "amp" else "tf32"
    for name, peaks in PEAKS:
        if name.lower() in str(device).lower():
            return peaks[kind]
    return None


def mfu(achieved, peak):
    """Model FLOPs utilisation: achieved over peak, or None where either is unknown."""
    return achieved / peak if achieved and peak else None
