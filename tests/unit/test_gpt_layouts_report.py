"""The report's GPT table (analysis/sections/special.py, analysis/figures/metrics.py) on records
written by hand: latency per iteration, TFLOP/s with the recompute term, aggregate PFLOP/s, the
bubble, and DLPerf's published case beside ours."""
import json
import os

import pytest

import analysis
from analysis.figures import metrics
from analysis.sections import special
from contract import parallel
from tests.sweepfiles import write_point, write_repeat

DLPERF_SHAPE = {"layers": 16, "hidden": 1536, "heads": 16, "seq_len": 2048, "vocab_size": 50257,
                "recompute": True}


def _cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _layout_point(sweep, name, settings, gpus_per_node, micro, glob, peak=None, case=None):
    lay, bad = parallel.resolve(settings, gpus_per_node, micro, None, glob)
    assert bad == []
    pt = write_point(sweep, name, model="gpt", precision="amp", amp_dtype="bf16", size="full",
                     batch_size=micro, gpus_per_node=gpus_per_node, settings=DLPERF_SHAPE)
    pt.update(parallel=lay.as_dict(), case=case, config={"peak_tflops": peak})
    with open(os.path.join(pt["dir"], "point.json"), "w") as f:
        json.dump(pt, f)
    return pt, lay


def test_dlperf_single_device_case_by_hand(tmp_path):
    s = str(tmp_path)
    pt, _ = _layout_point(s, "000-gpt", {}, 1, 2, 2, peak=125.0, case="DP_1x1x1_2_1536x16")
    write_repeat(pt, 0, [1.0])            # 10 iterations of 2 sequences in 1.0 s: 20 sequences/s
    m = metrics.metrics(analysis.load(s)).set_index("point").loc["000-gpt"]
    assert m.latency_ms == pytest.approx(100.0)
    # the suite's count (contract/flops.py), no recompute term: 3 x the layers' projections, the
    # causal pairs' scores and values (12 h a pair, s (s + 1) / 2 of them) and the logits
    per_sequence = 3 * 16 * 24 * 2048 * 1536**2 + 16 * 12 * 1536 * 2048 * 2049 // 2 + 3 * 2 * 2048 * 1536 * 50257
    assert m.tflops_per_device == pytest.approx(20 * per_sequence / 1e12)   # 142.7 TFLOP/s
    assert m.pflops == pytest.approx(20 * per_sequence / 1e15)
    assert m.mfu == pytest.approx(20 * per_sequence / 1e12 / 125.0)
    # DLPerf's (Megatron's) with recompute: 4 x the layers' forward, full s x s, + 3 x the logits
    megatron_count = 4 * 16 * (24 * 2048 * 1536**2 + 4 * 2048**2 * 1536) + 3 * 2 * 2048 * 1536 * 50257
    assert m.published_tflops_per_device == pytest.approx(20 * megatron_count / 1e12)   # 200.4 TFLOP/s
    assert m.published_mfu == pytest.approx(20 * megatron_count / 1e12 / 125.0)
    assert (m.dp, m.tp, m.pp, m.global_batch_size, m.layout) == (1, 1, 1, 2, "tp1-pp1")
    text = special.render_special(analysis.load(s))
    assert "## gpt: throughput and FLOP/s by layout" in text
    row = _cells(next(ln for ln in text.splitlines() if ln.startswith("| DP_1x1x1_2_1536x16")))
    assert row[1:7] == ["1536x16 rc", "1x1x1", "2", "1", "2", "100.0"]
    # beside DLPerf's published case: OneFlow 4.92 and Megatron-LM 4.31 samples/s on a V100
    beside = text.split("### Published beside it")[1]
    oneflow = _cells(next(ln for ln in beside.splitlines() if "OneFlow" in ln))
    megatron = _cells(next(ln for ln in beside.splitlines() if "Megatron" in ln and ln.startswith("|")))
    assert oneflow[-5] == "4.92" and oneflow[-1] == f"{20 / 4.92:.2f}" and oneflow[3] == "Tesla V100-SXM2-16GB"
    assert megatron[-5] == "4.31" and megatron[-1] == f"{20 / 4.31:.2f}"
    assert oneflow[-2] == megatron[-2] == f"{20 * megatron_count / 1e12:.3g}" == "200"   # ours, their count


def test_pipeline_point_counts_the_global_batch_and_its_bubble(tmp_path):
    s = str(tmp_path)
    # dp 1 x tp 2 x pp 2 on 4 ranks, micro 2 x 4 micro-batches = 8 sequences an iteration;
    # only rank 2 (tp 0 of the last stage) counts them
    pt, lay = _layout_point(s, "000-gpt-3d", {"tp": 2, "pp": 2}, 4, 2, 8)

    def fields(rank):
        c = parallel.coords(rank, lay)
        return {"parallel": {"layout": lay.as_dict(), "coords": c},
                "pipeline": {"ideal_bubble": parallel.ideal_bubble(lay),
                             "measured_bubble": [0.3, 0.3, 0.5, 0.5][rank]}}
    write_repeat(pt, 0, [2.0, 2.0, 2.0, 2.0], samples=lambda r: 8 if r == 2 else 0, fields=fields)
    m = metrics.metrics(analysis.load(s)).set_index("point").loc["000-gpt-3d"]
    assert m.throughput == pytest.approx(10 * 8 / 2.0)       # 40 sequences/s, the global batch's
    assert m.latency_ms == pytest.approx(200.0)              # 2.0 s / 10 iterations
    assert m.ideal_bubble == pytest.approx(1 / 5)            # (2 - 1) / (4 + 2 - 1)
    assert m.measured_bubble == pytest.approx(0.4)           # the ranks' mean
    row = _cells(next(ln for ln in special.render_special(analysis.load(s)).splitlines()
                      if "| 1x2x2 (1f1b)" in ln))
    assert row[2:7] == ["1x2x2 (1f1b)", "2", "4", "8", "200.0"] and row[13] == "20% / 40%"
