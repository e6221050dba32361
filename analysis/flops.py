"""FLOP counts and device peaks, written once (docs/flops.md), tested against hand figures.

Every count is of model FLOPs of one training step, a multiply-add counted as 2 FLOPs and
the backward pass as twice the forward (training = 3 x forward: the gradients of the
activations and of the weights each cost a forward). Matrix products and convolutions
only: normalisation, activations, softmax, dropout, pooling, residual additions,
embedding lookups and biases are left out, as in the papers the counts come from.

ResNet-50 v1.5 (`resnet_layers`): every convolution and the classifier, from the layer
shapes of frameworks/pytorch/models.py (the stride on the 3x3 convolution): a
convolution of k x k x c_in x c_out on an output of H x W costs H*W*k*k*c_in*c_out
multiply-adds. At 224 x 224 with 1000 classes that is 4,089,184,256 multiply-adds, the
"4.1 GFLOPs" usually quoted (which counts multiply-adds): 8.18 GFLOPs forward, 24.5 GFLOPs
per image trained.

BERT pretraining (`bert_forward_flops`), per sequence of s tokens, hidden h, l layers,
intermediate I, vocabulary V, P masked positions:

    layers   l * (8*s*h^2 + 4*s*h*I + 4*s^2*h)     QKV 6sh^2, scores 2s^2h, x values 2s^2h,
                                                   output 2sh^2, feed-forward 4shI
    pooler + NSP            2*h^2 + 4*h            on the [CLS] position only
    MLM head   P * (2*h^2 + 2*h*V)                 transform and the tied decoder

with P = the model's `max_predictions_per_seq` (20 when absent): the MLM head runs on the
gathered masked positions only, as the reference scripts do. Counting it on all s
positions instead (`predictions=None`) adds (s - P) * (2h^2 + 2hV): 5.19 GFLOPs forward
per sequence of BERT-base at s = 128 (docs/flops.md).

GPT (Megatron-style decoder), per training iteration, after Narayanan et al., "Efficient
Large-Scale Language Model Training on GPU Clusters Using Megatron-LM" (SC'21), section
5.1. With B sequences of s tokens, l layers, hidden h, vocabulary V, one layer's forward
pass is

    QKV projection 6Bsh^2 + attention scores 2Bs^2h + scores x values 2Bs^2h
    + output projection 2Bsh^2 + MLP (h -> 4h -> h) 16Bsh^2 = 24Bsh^2 + 4Bs^2h

and the output layer (logits) 2BshV. Without activation recomputation an iteration is
3 x forward:

    F = 72 B s l h^2 (1 + s/(6h) + V/(12 l h))

With it (`model.recompute=true`) the paper's better-known F = 96 B s l h^2 (1 + s/(6h) +
V/(16 l h)): the extra forward pass of the layers that full recomputation runs (4 x the
layers, 3 x the logits). That is the model's count, as the paper counts it; PyTorch's
checkpoint skips recomputing what backward does not need (the MLP's last layer), so the
hardware does a little less (tests/unit/test_flops.py).

Llama 3 (`llama3_flops_per_token`), by the formula torchtitan, PaLM (Chowdhery et al. 2022,
appendix B) and dgxc-benchmarking use: per token of a sequence of s tokens,

    6 N + 12 l h s           N: the parameters less the token embedding (the output layer
                             counts: it is a matmul; a tied one is counted once, as
                             torchtitan counts it); 12 l h s: attention scores and values,
                             2 matmuls x 2 FLOPs x 3 (forward and backward) x l h s

with no causal halving: the attention term counts the full s x s scores, as torchtitan's
get_dense_model_nparams_and_flops and PaLM do and as dgxc-benchmarking's published MFU does
(its 4.74E+14 FLOPs per 8B sequence of 8192 is this count), so our MFU and theirs are the
same ratio. Activation recomputation adds nothing: MFU counts the model's FLOPs, not the
hardware's (PaLM's MFU against HFU). N from the shape (`llama3_parameters`): per layer
2h^2 + 2 h k d (wq, wo; wk, wv with k key-value heads of d = h / heads) + 3 h f (SwiGLU, f
wide) + 2h (RMSNorms), a final RMSNorm h, the embedding V h and an untied output V h. Hand
figures for 8B at 8192: docs/flops.md.

DeepSeek-V3 (`deepseek_v3_flops_per_token`), a mixture of experts, counted on its activated
parameters as dgxc-benchmarking counts it (NeMo's flops_formulas.deepseekv3, whose figure
dgxc-benchmarking's TFLOPS_per_GPU and MFU are): per token of a sequence of s tokens, with l
layers of which d dense, hidden h, H heads, the MLA's ranks q_r (0: one query projection)
and kv_r, head dims n (no position), r (rotary) and v, the dense SwiGLU f wide, experts m
wide, k routed and S shared per token, vocabulary V, and T multi-token-prediction layers:

    attention   3 H (n + r + v) s (l + T)                causal: half of the s x s scores
    MLA         6 (l + T) [h q_r + q_r H (n + r)  (or h H (n + r) without q_r)
                           + h r + h kv_r + kv_r H (n + v) + H v h]
    SwiGLUs     6 [d 3 h f + (l - d + T) 3 h m (S + k)]  the k routed experts a token uses
    output      6 V h (1 + T) + 6 T 2 h^2                MTP's own output and projection

norms, the router and the embedding left out. 671B at 4096 with T = 1 (dgxc-benchmarking's
NeMo recipe): 259,992,059,904 a token, and its 1,024-H100 run's 629.67 tokens/s per GPU
times that is its published 163.7 TFLOP/s per GPU (docs/flops.md). The suite's models train
without MTP (T = `mtp_layers`, 0). torchtitan counts the same model otherwise (6 x its
activated parameters, norms and router included, + 6 l H (n + r + v) s, no causal halving:
281,158,232,064 at 671B); `deepseek_v3_parameters` gives its totals: every parameter, and the
activated ones (the dense ones, the router, the shared experts, k / E of the routed).

Qwen3's MoE (`qwen3_moe_flops_per_token`) in DeepSeek-V3's convention, with its shapes (H
heads and k_v key-value heads of width d, every layer a MoE of m-wide experts, k per token, no
shared one): 3 H 2 d s l (causal-halved scores) + 6 l [h H d + 2 h k_v d + H d h + 3 h m k] +
6 V h. (NeMo's qwen3 formula takes H d = h, which Qwen3's MoE sizes are not: 32 x 128 at 2048.)

Peaks: analysis/peaks.yaml (dense datasheet figures, each with its source), keyed by the
device's normalised name (analysis/matching.py) and the dtype the math ran in
(`math_dtype`): AMP against its bf16 or fp16 peak; fp32 against the TF32 peak on devices
that have TF32 (Ampere and newer, where every framework here runs fp32 matrix maths as
TF32 by default: PyTorch's session sets it), else against the fp32 peak.
"""
import functools
import os

import yaml

from analysis import matching
from contract import paths, values

PEAKS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peaks.yaml")
DEFAULT_MAX_PREDICTIONS = 20   # masked positions per sequence at seq 128 (conf/model/bert_base.yaml)
DTYPES = ("fp32", "tf32", "bf16", "fp16")
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)   # libyaml's where the wheel has it


# ---- ResNet-50 v1.5 ----------------------------------------------------------------------
def _out(size, kernel, stride, pad) -> int:
    return (size + 2 * pad - kernel) // stride + 1


def resnet_layers(layers=(3, 4, 6, 3), width=64, image_size=224, num_classes=1000, **_) -> list:
    """Every convolution and the classifier of ResNet v1.5 as frameworks/pytorch/models.py
    builds it: (name, k, c_in, c_out, out_h, out_w), the classifier as a 1x1 "convolution"
    on a 1x1 output."""
    out = []
    n = _out(image_size, 7, 2, 3)
    out.append(("stem", 7, 3, width, n, n))
    n = _out(n, 3, 2, 1)                                   # max pool
    cin = width
    for stage, blocks in enumerate(layers):
        w = width * 2 ** stage
        for i in range(blocks):
            stride = 2 if (i == 0 and stage > 0) else 1
            name = f"stage{stage + 1}.block{i + 1}"
            m = _out(n, 3, stride, 1)                       # v1.5: the stride on the 3x3
            out.append((f"{name}.conv1", 1, cin, w, n, n))
            out.append((f"{name}.conv2", 3, w, w, m, m))
            out.append((f"{name}.conv3", 1, w, 4 * w, m, m))
            if stride != 1 or cin != 4 * w:
                out.append((f"{name}.down", 1, cin, 4 * w, m, m))
            cin, n = 4 * w, m
    out.append(("fc", 1, cin, num_classes, 1, 1))
    return out


def resnet_forward_macs(**model) -> int:
    """Multiply-adds of one image's forward pass (the "4.1 GFLOPs" of ResNet-50 at 224)."""
    return sum(h * w * k * k * cin * cout for _, k, cin, cout, h, w in resnet_layers(**model))


def resnet_flops_per_sample(model: dict) -> int:
    """Training FLOPs of one image: 3 x forward, 2 FLOPs a multiply-add."""
    keys = ("layers", "width", "image_size", "num_classes")
    return 3 * 2 * resnet_forward_macs(**{k: model[k] for k in keys if k in model})


# ---- BERT pretraining ---------------------------------------------------------------------
def bert_forward_flops(seq_len, hidden, layers, intermediate, vocab_size, predictions=None) -> int:
    """Forward FLOPs of one sequence (module docstring); the MLM head on `predictions`
    positions (the gathered masked ones), or on all seq_len positions when None."""
    s, h, l, i, v = seq_len, hidden, layers, intermediate, vocab_size
    p = s if predictions is None else min(int(predictions), s)
    encoder = l * (8 * s * h * h + 4 * s * h * i + 4 * s * s * h)
    pooler_nsp = 2 * h * h + 2 * h * 2
    mlm = p * (2 * h * h + 2 * h * v)
    return encoder + pooler_nsp + mlm


def bert_predictions(model: dict) -> int:
    """Masked positions per sequence the MLM head runs on: `max_predictions_per_seq`, 20
    when the model config has none."""
    p = model.get("max_predictions_per_seq")
    return DEFAULT_MAX_PREDICTIONS if p is None else int(p)


def bert_flops_per_sample(model: dict, gathered: bool = True) -> int:
    """Training FLOPs of one sequence: 3 x forward; `gathered=False`: the MLM head on all
    positions (the count before the gather, for comparison)."""
    keys = ("seq_len", "hidden", "layers", "intermediate", "vocab_size")
    return 3 * bert_forward_flops(*(model[k] for k in keys),
                                  predictions=bert_predictions(model) if gathered else None)


# ---- GPT ------------------------------------------------------------------------------------
def gpt_flops_per_iteration(batch, seq_len, layers, hidden, vocab, recompute=False) -> int:
    """Megatron's count for one training iteration of `batch` sequences (exact integers)."""
    B, s, l, h, V = batch, seq_len, layers, hidden, vocab
    forward_layers = l * (24 * B * s * h * h + 4 * B * s * s * h)
    logits = 2 * B * s * h * V
    return (4 if recompute else 3) * forward_layers + 3 * logits


def _gpt(model):
    """One sequence; with activation recomputation (`model.recompute`) the paper's extra
    forward pass of the layers counts too, as Narayanan et al. count it."""
    return gpt_flops_per_iteration(1, *(model[k] for k in ("seq_len", "layers", "hidden", "vocab_size")),
                                   recompute=bool(model.get("recompute")))


# ---- Llama 3 ---------------------------------------------------------------------------------
def llama3_parameters(layers, hidden, heads, kv_heads, ffn_hidden, vocab_size, tie_embeddings=False,
                      **_) -> dict:
    """{total, embedding, non_embedding} parameters of a Llama 3 shape (module docstring)."""
    l, h, f, V = layers, hidden, ffn_hidden, vocab_size
    kv = kv_heads * (hidden // heads)
    per_layer = 2 * h * h + 2 * h * kv + 3 * h * f + 2 * h
    total = l * per_layer + h + V * h + (0 if tie_embeddings else V * h)
    embedding = 0 if tie_embeddings else V * h   # tied: the one matrix is the output layer too
    return {"total": total, "embedding": embedding, "non_embedding": total - embedding}


def llama3_flops_per_token(model: dict) -> int:
    """6 N + 12 l h s: training FLOPs of one token (module docstring; no causal halving)."""
    n = llama3_parameters(**model)["non_embedding"]
    return 6 * n + 12 * model["layers"] * model["hidden"] * model["seq_len"]


def _llama3(model):
    return llama3_flops_per_token(model) * model["seq_len"]


# ---- DeepSeek-V3 (a mixture of experts) ----------------------------------------------------
def _mla(h, heads, q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim) -> int:
    """One layer's multi-head latent attention projections (weights only)."""
    qk = qk_nope_head_dim + qk_rope_head_dim
    q = h * q_lora_rank + q_lora_rank * heads * qk if q_lora_rank else h * heads * qk
    return (q + h * (kv_lora_rank + qk_rope_head_dim)
            + kv_lora_rank * heads * (qk_nope_head_dim + v_head_dim) + heads * v_head_dim * h)


def _mla_shape(model: dict) -> tuple:
    return tuple(model[k] for k in ("hidden", "heads", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
                                    "qk_rope_head_dim", "v_head_dim"))


def deepseek_v3_parameters(model: dict) -> dict:
    """{total, active, embedding, routed}: every parameter (norms, router and embedding
    included, as torchtitan counts them), the activated ones (module docstring), the token
    embedding's, the routed experts' (all of them)."""
    h, layers, dense, E, k = (model[x] for x in ("hidden", "layers", "dense_layers", "experts", "top_k"))
    norms = 2 * h + (model["q_lora_rank"] or 0) + model["kv_lora_rank"]   # block's two, q_norm, kv_norm
    attention = _mla(*_mla_shape(model)) + norms
    routed = 3 * E * model["moe_hidden"] * h
    moe = routed + E * h + 3 * h * model["moe_hidden"] * model["shared_experts"]
    embedding = model["vocab_size"] * h
    total = layers * attention + dense * 3 * h * model["ffn_hidden"] + (layers - dense) * moe \
        + h + 2 * embedding
    active = total - (layers - dense) * (routed - routed * k // E)
    return {"total": total, "active": active, "embedding": embedding, "routed": (layers - dense) * routed}


def deepseek_v3_flops_per_token(model: dict, mtp_layers=None) -> int:
    """Training FLOPs of one token, dgxc-benchmarking's (NeMo's) count (module docstring);
    `mtp_layers`: T, the model's own (0 where unsaid) unless given."""
    T = (model.get("mtp_layers") or 0) if mtp_layers is None else mtp_layers
    h, layers, dense, s = model["hidden"], model["layers"], model["dense_layers"], model["seq_len"]
    heads, n, r, v = model["heads"], model["qk_nope_head_dim"], model["qk_rope_head_dim"], model["v_head_dim"]
    attention = 3 * heads * (n + r + v) * s * (layers + T)
    swiglus = dense * 3 * h * model["ffn_hidden"] \
        + (layers - dense + T) * 3 * h * model["moe_hidden"] * (model["shared_experts"] + model["top_k"])
    linear = 6 * (_mla(*_mla_shape(model)) * (layers + T) + swiglus)
    output = 6 * model["vocab_size"] * h * (1 + T) + 6 * T * 2 * h * h
    return attention + linear + output


def _deepseek_v3(model):
    return deepseek_v3_flops_per_token(model) * model["seq_len"]


# ---- Qwen3's MoE -----------------------------------------------------------------------------
def qwen3_moe_parameters(model: dict) -> dict:
    """{total, active, embedding, routed} of a Qwen3 MoE shape (DeepSeek-V3's definitions)."""
    h, layers, E, k, d = (model[x] for x in ("hidden", "layers", "experts", "top_k", "head_dim"))
    attention = 2 * h * model["heads"] * d + 2 * h * model["kv_heads"] * d + 2 * d   # wq, wo; wk, wv; q/k norms
    routed = 3 * E * model["moe_hidden"] * h
    embedding = model["vocab_size"] * h
    total = layers * (attention + 2 * h + E * h + routed) + h + 2 * embedding
    active = total - layers * (routed - routed * k // E)
    return {"total": total, "active": active, "embedding": embedding, "routed": layers * routed}


def qwen3_moe_flops_per_token(model: dict) -> int:
    """Training FLOPs of one token (module docstring)."""
    h, layers, s, heads, d = (model[x] for x in ("hidden", "layers", "seq_len", "heads", "head_dim"))
    linear = 2 * h * heads * d + 2 * h * model["kv_heads"] * d + 3 * h * model["moe_hidden"] * model["top_k"]
    return 3 * heads * 2 * d * s * layers + 6 * layers * linear + 6 * model["vocab_size"] * h


def _qwen3_moe(model):
    return qwen3_moe_flops_per_token(model) * model["seq_len"]


COUNTS = {  # model name -> (the settings the count needs, the count of one sample)
    "gpt": (("seq_len", "layers", "hidden", "vocab_size"), _gpt),
    "llama3": (("seq_len", "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab_size"), _llama3),
    "deepseek_v3": (("seq_len", "layers", "hidden", "heads", "kv_lora_rank", "qk_nope_head_dim",
                     "qk_rope_head_dim", "v_head_dim", "moe_hidden", "experts", "top_k", "vocab_size"),
                    _deepseek_v3),
    "qwen3_moe": (("seq_len", "layers", "hidden", "heads", "kv_heads", "head_dim", "moe_hidden", "experts",
                   "top_k", "vocab_size"), _qwen3_moe),
    "resnet50": (("layers", "width", "image_size", "num_classes"), resnet_flops_per_sample),
    "bert_base": (("seq_len", "hidden", "layers", "intermediate", "vocab_size"), bert_flops_per_sample),
}


def flops_per_sample(model: dict):
    """Training FLOPs of one sample (image, sequence) of a model's settings (a point's
    `model`: name and the size folded in), or None where no count is known."""
    keys, count = COUNTS.get(model.get("name"), ((), None))
    if count is None or not all(model.get(k) for k in keys):
        return None
    return count(model)


def achieved_tflops_per_device(samples_per_s, flops_sample, devices):
    """Model FLOPs done per second per device, in TFLOP/s."""
    if not samples_per_s or not flops_sample or not devices or samples_per_s != samples_per_s:
        return None
    return samples_per_s * flops_sample / devices / 1e12


# ---- peaks ------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def peaks(path: str = PEAKS_FILE) -> tuple:
    """The entries of analysis/peaks.yaml, checked (ValueError when malformed)."""
    with open(path) as f:
        data = yaml.load(f, Loader=LOADER)
    if not isinstance(data, dict) or data.get("schema") != paths.PEAKS_SCHEMA:
        raise ValueError(f"{path}: not a {paths.PEAKS_SCHEMA} file")
    out = []
    for n, e in enumerate(data.get("devices") or (), 1):
        if not isinstance(e, dict) or not e.get("family") or not e.get("source"):
            raise ValueError(f"{path}: entry {n} needs a family and a source")
        if e.get("form") not in (None, "sxm", "pcie", "nvl"):
            raise ValueError(f"{path}: entry {n}: form {e['form']!r}")
        for d in DTYPES:
            v = e.get(d)
            if v is not None and not (values.is_number(v) and v > 0):
                raise ValueError(f"{path}: entry {n}: {d} must be a positive number, got {v!r}")
        out.append(dict(e, family=str(e["family"]).upper()))
    return tuple(out)


def peak_entry(device):
    """The peaks.yaml entry of a device name, or None (analysis/matching.py's rule)."""
    key = matching.device_key(device)
    if key.family is None:
        return None
    mine = [e for e in peaks() if e["family"] == key.family]
    exact = [e for e in mine if key.form is not None and e.get("form") == key.form]
    anyform = [e for e in mine if e.get("form") is None]
    default = [e for e in mine if e.get("default")]
    for group in (exact, anyform, default, mine[:1]):
        if group:
            return group[0]
    return None


def math_dtype(device, precision, amp_dtype=None) -> str:
    """The dtype a run's matrix maths ran in: AMP's bf16 or fp16; fp32 as tf32 on a device
    with a TF32 peak (Ampere and newer), else fp32."""
    if precision == "amp":
        return amp_dtype or "bf16"
    entry = peak_entry(device)
    return "tf32" if entry and entry.get("tf32") else "fp32"


def peak(device, precision, amp_dtype=None, override=None) -> dict:
    """{tflops, dtype, source} of a run: `override` (the peak_tflops= config key) when given,
    else the device's dense peak for the dtype the math ran in; tflops None when unknown."""
    dtype = math_dtype(device, precision, amp_dtype)
    if override:
        return {"tflops": float(override), "dtype": dtype, "source": "peak_tflops= (config)"}
    entry = peak_entry(device)
    value = entry.get(dtype) if entry else None
    return {"tflops": float(value) if value else None, "dtype": dtype,
            "source": entry["source"] if entry and value else None}


def peak_tflops(device, precision, amp_dtype=None, override=None):
    """The device's dense peak for the run's precision, `override` if given, else None."""
    return peak(device, precision, amp_dtype, override)["tflops"]


def mfu(achieved, peak_value):
    """Model FLOPs utilisation: achieved over peak, or None where either is unknown."""
    return achieved / peak_value if achieved and peak_value else None
