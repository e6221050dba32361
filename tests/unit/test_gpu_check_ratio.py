"""The harness / bare ratio of alternated rounds and its spread (benchmarks/gpu_check/ratio.py),
and the GPU check's rows and noise line made of it (figures.py), against figures by hand."""
import pytest

from benchmarks.gpu_check import figures
from benchmarks.gpu_check.ratio import spread


def test_within_noise_when_the_rounds_straddle_one():
    s = spread([100.0, 90.0, 110.0], [100.0, 100.0, 100.0])     # 1.00, 0.90, 1.10
    assert s.ratios == pytest.approx((1.0, 0.9, 1.1))
    assert (s.median, s.low, s.high, s.rounds) == (pytest.approx(1.0), pytest.approx(0.9), pytest.approx(1.1), 3)
    assert s.within_noise
    assert s.verdict() == "harness / bare 1.00 (0.90-1.10 over 3 rounds): within noise (the spread includes 1.0)"


def test_a_cost_when_every_round_is_below_one():
    s = spread([85.0, 88.0, 86.0, 87.0], [100.0, 100.0, 100.0, 100.0])   # 0.85, 0.88, 0.86, 0.87
    assert s.median == pytest.approx(0.865) and (s.low, s.high) == (pytest.approx(0.85), pytest.approx(0.88))
    assert not s.within_noise
    assert s.verdict().endswith("over 4 rounds): the harness costs 12%-15%")


def test_each_round_is_paired_with_its_own_bare_round():
    # the machine slowed in round 2: both sides halved, the ratio did not move
    s = spread([100.0, 50.0, 99.0], [100.0, 50.0, 100.0])
    assert s.ratios == pytest.approx((1.0, 1.0, 0.99)) and s.within_noise
    faster = spread([210.0, 220.0], [200.0, 200.0])              # 1.05, 1.10
    assert faster.median == pytest.approx(1.075) and not faster.within_noise
    assert faster.verdict().endswith(": the harness was the faster in every round")


def test_a_round_with_one_side_missing_is_left_out_and_bad_input_is_refused():
    s = spread([100.0, None, 90.0], [100.0, 100.0, 100.0])
    assert s.ratios == pytest.approx((1.0, 0.9)) and s.median == pytest.approx(0.95)
    assert spread([100.0], [100.0]).within_noise                 # exactly 1.0 is within
    with pytest.raises(ValueError, match="3 harness rounds against 2 bare rounds"):
        spread([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="no round"):
        spread([None], [100.0])


def _pair(harness, bare, dtypes=("bf16", "bf16"), threads=(1, 1), error=None):
    return {"rounds": len(harness), "harness": harness, "harness_error": None, "harness_amp_dtype": dtypes[0],
            "harness_threads": threads[0],
            "bare": {"suite": {"kind": "suite", "error": error, "samples_per_s": bare, "amp_dtype": dtypes[1],
                               "torch_threads": threads[1], "device": "NVIDIA H200"}}}


def test_a_bare_row_gives_the_ratio_with_its_spread():
    pair = _pair([2100.0, 2200.0, 2000.0], [2400.0, 2500.0, 2450.0])   # 0.875, 0.88, 0.8163...
    row = figures._bare_row("bert-bare", pair, pair["bare"]["suite"], pair["harness"])
    assert row.status == "ok" and row.value == 2450.0 and row.figure == "2,450.0 samples/s"
    assert row.beside == "2,100.0 samples/s (harness, its rank, same rounds)"
    assert row.ratio == pytest.approx(0.875) and row.spread == pytest.approx([2000 / 2450, 2200 / 2500])
    assert row.cells()[4] == "0.88 (0.82-0.88)" and row.within_noise is False
    assert "per round 0.88, 0.88, 0.82" in row.note and "both bf16, 1 threads" in row.note
    assert figures.noise_line([row]) == ("harness / bare, rounds alternated: none within noise; "
                                         "outside the noise: bert-bare 0.88 (0.82-0.88)")
    other = figures.Row("rn50-bare-bf16", "ok", ratio=1.0, spread=[0.98, 1.02], within_noise=True)
    assert figures.noise_line([other, figures.Row("rn50 bf16", "ok")]) == (
        "harness / bare, rounds alternated: within noise (the spread includes 1.0): rn50-bare-bf16")
    assert figures.noise_line([figures.Row("rn50 bf16", "ok")]) == ""


def test_a_bare_row_refuses_unlike_work_and_says_why_a_loop_did_not_run():
    pair = _pair([100.0, 100.0, 100.0], [100.0, 100.0, 100.0], dtypes=("fp16", "bf16"), threads=(16, 8))
    row = figures._bare_row("rn50-bare-fp16", pair, pair["bare"]["suite"], pair["harness"])
    assert row.status == "failed"
    assert "NOT the same: dtype fp16 (harness) vs bf16 (bare), threads 16 (harness) vs 8 (bare)" in row.note
    missing = _pair([100.0], [None], error="rc 1: ModuleNotFoundError: No module named 'torchvision'")
    row = figures._bare_row("rn50-bare-torchvision", missing, missing["bare"]["suite"], [100.0])
    assert row.status == "skipped" and "torchvision" in row.note and row.ratio is None
