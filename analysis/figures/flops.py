"""FLOP counts and device peaks (docs/flops.md), tested against hand figures.

Every count is of model FLOPs of one training step, a multiply-add counted as 2 FLOPs and
the backward pass as twice the forward (training = 3 x forward: the gradients of the
activations and of the weights each cost a forward). Matrix products and convolutions
only: normalisation, activations, softmax, dropout, pooling, residual additions,
embedding lookups and biases are left out, as in the papers the counts come from.

Each model's count lives in its spec (contract/models/<name>.py: ResNet-50's convolutions,
BERT's gathered MLM head, the language models' by contract/flops.py's one convention: attention
over the pairs its mask leaves, no recompute term), with its derivation; `flops_per_sample` asks
it. Where a model's published figures count otherwise (Llama 3's full s x s, Megatron's GPT with
recomputation, NeMo's DeepSeek-V3), `published_ratio` turns a point's TFLOP/s and MFU into
their count, the figures the report sets beside the published ones.

Peaks: analysis/peaks.yaml (dense datasheet figures, each with its source), keyed by the
device's normalised name (analysis/figures/matching.py) and the dtype the math ran in
(`math_dtype`): AMP against its bf16 or fp16 peak; fp32 against the TF32 peak on devices
that have TF32 (Ampere and newer, where every framework here runs fp32 matrix maths as
TF32 by default: PyTorch's session sets it), else against the fp32 peak.
"""
import functools
import os

import yaml

from analysis.figures import matching
from contract import models, paths, values

# the site's own file to edit, named by the report: analysis/peaks.yaml
PEAKS_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "peaks.yaml")
DTYPES = ("fp32", "tf32", "bf16", "fp16")
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)   # libyaml's where the wheel has it


def flops_per_sample(model: dict):
    """Training FLOPs of one sample (image, sequence) of a model's settings (a point's
    `model`: name and the size folded in), or None where no count is known (its spec's,
    contract/models/)."""
    spec = models.find(model.get("name"))
    return spec.flops_per_sample(model) if spec else None


def published_ratio(model: dict):
    """Their FLOPs of one sample over ours, for a model whose published figures count otherwise
    (its spec's `published_flops`): a point's TFLOP/s and MFU times it are the figures in their
    count, to set beside theirs; None where the model has no such count."""
    spec = models.find(model.get("name"))
    theirs = spec.published_flops_per_sample(model) if spec else None
    ours = spec.flops_per_sample(model) if spec else None
    return theirs / ours if theirs and ours else None


def published_flops_per_sample(model: dict):
    """A model's FLOPs of one sample as its published figures count them, or None."""
    spec = models.find(model.get("name"))
    return spec.published_flops_per_sample(model) if spec else None


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
    """The peaks.yaml entry of a device name, or None (analysis/figures/matching.py's rule)."""
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
