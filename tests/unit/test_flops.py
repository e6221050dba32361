"""FLOP counts and peaks (analysis/flops.py) against hand-computed figures."""
import json
import os

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

import analysis
from analysis import flops, special
from frameworks.pytorch import special as torch_special
from tests.frameworks_env import model_cfg
from tests.sweepfiles import write_point, write_repeat


def test_gpt_count_by_hand():
    # B=1, s=2, l=1, h=6, V=12. Forward of the layer: 24*B*s*h^2 = 1728 and 4*B*s^2*h = 96;
    # logits 2*B*s*h*V = 288; forward 2112; training = 3 x forward = 6336.
    assert flops.gpt_flops_per_iteration(1, 2, 1, 6, 12) == 6336
    assert flops.megatron_formula(1, 2, 1, 6, 12) == pytest.approx(6336)
    # with full recomputation: 4 x 1824 + 3 x 288 = 8160 = 96*B*s*l*h^2*(1 + s/6h + V/16lh)
    assert flops.gpt_flops_per_iteration(1, 2, 1, 6, 12, recompute=True) == 8160
    assert flops.megatron_formula(1, 2, 1, 6, 12, recompute=True) == pytest.approx(8160)


def test_dlperf_gpt_sequence_by_hand():
    # DLPerf's DP case, hidden 1536 x 16 layers, seq 2048, vocab 51200, one sequence:
    # 72*s*l*h^2 = 2359296^2, times (1 + 2048/9216 + 51200/294912) = 201/144.
    assert flops.gpt_flops_per_iteration(1, 2048, 16, 1536, 51200) == 2359296**2 // 144 * 201
    assert flops.gpt_flops_per_iteration(1, 2048, 16, 1536, 51200) == 7_769_595_838_464
    # linear in the batch
    assert flops.gpt_flops_per_iteration(8, 2048, 16, 1536, 51200) == 8 * 7_769_595_838_464


def test_count_matches_torch_flop_counter_on_the_real_model():
    """The suite's GPT, counted matmul by matmul by torch: forward and backward."""
    cfg = dict(model_cfg("gpt", "tiny"), dropout=0.0)
    model = torch_special.GPT(**cfg)
    b = 3
    (tokens,), (labels,) = torch_special.synthetic_batch(cfg, b, "cpu", torch.Generator().manual_seed(0))
    # the math kernel: attention as two batched matmuls, which the counter sees on a CPU
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        torch_special.gpt_loss(model(tokens), labels).backward()
    expected = flops.gpt_flops_per_iteration(b, cfg["seq_len"], cfg["layers"], cfg["hidden"],
                                             cfg["vocab_size"])
    assert counter.get_total_flops() == expected


@pytest.mark.parametrize("device,precision,amp_dtype,peak", [
    ("NVIDIA H100 80GB HBM3", "amp", "bf16", 989.0),
    ("NVIDIA H100 80GB HBM3", "fp32", None, 494.5),
    ("NVIDIA H100 PCIe", "amp", "fp16", 756.0),
    ("NVIDIA H200", "amp", "bf16", 989.0),
    ("NVIDIA A100-SXM4-80GB", "amp", "bf16", 312.0),
    ("NVIDIA A100-SXM4-80GB", "fp32", None, 156.0),
    ("cpu", "fp32", None, None),
    (None, "amp", "bf16", None),
])
def test_peaks(device, precision, amp_dtype, peak):
    assert flops.peak_tflops(device, precision, amp_dtype) == peak


def test_override_and_mfu():
    assert flops.peak_tflops("cpu", "fp32", override=2.5) == 2.5
    # 10 sequences/s of DLPerf's GPT on 1 device: 77.69595838464 TFLOP/s; on an H100 in bf16
    achieved = flops.achieved_tflops_per_device(10.0, 7_769_595_838_464, 1)
    assert achieved == pytest.approx(77.69595838464)
    assert flops.mfu(achieved, 989.0) == pytest.approx(0.0785601)
    assert flops.achieved_tflops_per_device(20.0, 7_769_595_838_464, 2) == pytest.approx(achieved)
    assert flops.mfu(achieved, None) is None


def _gpt_point(sweep, name, peak=None, **kw):
    pt = write_point(sweep, name, model="gpt", **kw)
    pt["model"].update(layers=16, hidden=1536, heads=16, seq_len=2048, vocab_size=51200)
    pt["config"] = {"peak_tflops": peak}
    with open(os.path.join(pt["dir"], "point.json"), "w") as f:
        json.dump(pt, f)
    return pt


def test_gpt_figures_from_records(tmp_path):
    s = str(tmp_path)
    # 10 steps x 8 sequences in 1.0 s = 80 sequences/s on 1 device
    write_repeat(_gpt_point(s, "000-gpt", peak=1000.0), 0, [1.0])
    # 2 devices, 2 x 80 sequences in 2.0 s = 80 sequences/s: 40 per device
    write_repeat(_gpt_point(s, "001-gpt", gpus_per_node=2), 0, [2.0, 1.5])
    m = special.metrics(analysis.load(s)).set_index("point")
    one, two = m.loc["000-gpt"], m.loc["001-gpt"]
    assert one.tokens_per_s == pytest.approx(80 * 2048)
    assert one.tflops_per_device == pytest.approx(80 * 7_769_595_838_464 / 1e12)
    assert one.mfu == pytest.approx(80 * 7.769595838464 / 1000.0)
    assert two.tflops_per_device == pytest.approx(40 * 7.769595838464)
    assert two.mfu is None or two.mfu != two.mfu          # a CPU with no peak given: n/a
    assert one.latency_ms == pytest.approx(100.0)          # 1.0 s / 10 steps
    assert two.latency_ms == pytest.approx(200.0)          # the longest rank's window
