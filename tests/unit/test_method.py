"""The method's arithmetic against figures computed by hand."""
import numpy as np
import pytest

from analysis.figures import points as figures
from analysis.figures import method
from analysis.read import record_file


def test_throughput_is_global_samples_over_longest_window():
    # 2 ranks, 100 timed steps of batch 8 each = 1600 samples; windows 4.0 s and 5.0 s.
    assert method.throughput([800, 800], [4.0, 5.0]) == pytest.approx(320.0)


def test_throughput_is_not_the_mean_of_step_rates():
    # One rank, batch 10: steps of 0.1 s and 0.3 s. Rates 100 and 33.3/s average 66.7/s,
    # but 20 samples took 0.4 s: the throughput is 50/s.
    rec = {"steps": [{"phase": "warmup", "samples": 10, "start": 0.0, "end": 5.0},
                     {"phase": "measure", "samples": 10, "start": 5.0, "end": 5.1},
                     {"phase": "measure", "samples": 10, "start": 5.1, "end": 5.4}],
           "window": {"start": 5.0, "end": 5.4}}
    timed = [s["samples"] for s in rec["steps"] if s["phase"] == "measure"]
    assert method.repeat_throughput([method.rank_timing(timed, rec["window"])]) == pytest.approx(50.0)
    mean_of_rates = (10 / 0.1 + 10 / 0.3) / 2
    assert mean_of_rates == pytest.approx(66.67, abs=0.01)


def test_warmup_steps_do_not_count():
    # a repeat's figures as analysis.load computes them (figures.repeat_figures: the step
    # columns, the phase as its code), then by hand: 3 timed steps of 4 in 3.0 s
    rec = {"steps": [{"phase": "warmup", "samples": 1000, "start": 0, "end": 1}] +
                    [{"phase": "measure", "samples": 4, "start": 1 + i, "end": 2 + i} for i in range(3)],
           "window": {"start": 1.0, "end": 4.0}}
    cols = {k: np.array([s[k] for s in rec["steps"]]) for k in ("samples", "start", "end")}
    cols["phase"] = np.array([record_file.PHASE_CODE[s["phase"]] for s in rec["steps"]])
    figs, _ = figures.repeat_figures({0: {"host": "h", "window": rec["window"]}}, {0: cols})
    assert (figs["samples"], figs["window_s"], figs["throughput"]) == (12, 3.0, 4.0)


def test_summary_median_and_spread():
    s = method.summarize([100.0, 110.0, 90.0, 120.0, 80.0])
    assert s["median"] == 100.0 and s["min"] == 80.0 and s["max"] == 120.0 and s["n"] == 5
    # sample standard deviation: sqrt((0+100+100+400+400)/4) = 15.811; mean 100
    assert s["cv"] == pytest.approx(0.15811, abs=1e-5)
    assert method.summarize([7.0])["cv"] == 0.0
    assert method.summarize([])["median"] is None


def test_median_of_even_count_is_mean_of_middle_two():
    assert method.summarize([1.0, 2.0, 4.0, 10.0])["median"] == 3.0


def test_speedup_and_efficiency():
    assert method.speedup(1500.0, 400.0) == pytest.approx(3.75)
    assert method.efficiency(3.75, 4) == pytest.approx(0.9375)
    assert method.speedup(None, 400.0) is None and method.speedup(1.0, None) is None


@pytest.mark.parametrize("samples,windows", [([], []), ([1, 2], [1.0]), ([1], [0.0])])
def test_throughput_rejects_bad_input(samples, windows):
    with pytest.raises(ValueError):
        method.throughput(samples, windows)


# ---- the median's 95% interval: order statistics, by hand -------------------------------------
# [x(j), x(n+1-j)] covers the median with probability 1 - 2 P(B <= j-1), B ~ Binomial(n, 1/2).
@pytest.mark.parametrize("n,expected", [
    (1, None), (3, None),
    (5, None),                           # j=1: 1 - 2/32 = 0.9375 < 0.95: no 95% interval
    (6, (1, 1 - 2 / 64)),                # min..max: 0.96875
    (7, (1, 1 - 2 / 128)),               # j=2 would be 1 - 2*8/128 = 0.875
    (8, (1, 1 - 2 / 256)),               # j=2: 1 - 2*9/256 = 0.9297 < 0.95
    (9, (2, 1 - 2 * 10 / 512)),          # P(B<=1) = (1+9)/512: 0.9609375
    (12, (3, 1 - 2 * 79 / 4096)),        # P(B<=2) = (1+12+66)/4096: 0.96142578125
])
def test_median_ci_rank_by_hand(n, expected):
    got = method.median_ci_rank(n)
    if expected is None:
        assert got is None
    else:
        assert got[0] == expected[0] and got[1] == pytest.approx(expected[1])


def test_median_ci_values():
    # 9 values: j = 2, so the 2nd and the 8th smallest
    ci = method.median_ci([9.0, 1.0, 8.0, 2.0, 7.0, 3.0, 6.0, 4.0, 5.0])
    assert (ci["lo"], ci["hi"], ci["j"]) == (2.0, 8.0, 2)
    assert ci["coverage"] == pytest.approx(0.9609375)
    # 6 values: the whole range, 96.875%
    ci = method.median_ci([10.0, 12.0, 11.0, 15.0, 9.0, 13.0])
    assert (ci["lo"], ci["hi"]) == (9.0, 15.0) and ci["coverage"] == pytest.approx(0.96875)
    # 5 values: none (the report shows min..max, which covers 1 - 2^-4 = 93.75%)
    assert method.median_ci([1.0, 2.0, 3.0, 4.0, 5.0])["lo"] is None
    # min..max (j = 1) of n values covers 1 - 2 P(B <= 0) = 1 - 2^(1-n)
    assert 1 - 2 * method.binomial_cdf_half(0, 5) == pytest.approx(0.9375)
    assert 1 - 2 * method.binomial_cdf_half(0, 3) == pytest.approx(0.75)
    s = method.summarize([100.0, 110.0, 90.0, 120.0, 80.0, 105.0])
    assert (s["ci_lo"], s["ci_hi"]) == (80.0, 120.0) and s["ci_coverage"] == pytest.approx(0.96875)
    assert method.summarize([100.0, 110.0])["ci_lo"] is None


def test_percentiles_by_nearest_rank():
    # 10 steps of 1..10 ms: p50 = the ceil(5.0) = 5th, p90 = the 9th, p99 = the ceil(9.9) = 10th
    q = method.percentiles([0.007, 0.001, 0.010, 0.002, 0.003, 0.009, 0.004, 0.005, 0.006, 0.008])
    assert q == {50: 0.005, 90: 0.009, 99: 0.010}
    # 100 steps 1..100: the 50th, 90th, 99th
    assert method.percentiles(list(range(100, 0, -1))) == {50: 50.0, 90: 90.0, 99: 99.0}
    assert method.percentiles([]) == {50: None, 90: None, 99: None}
    assert method.percentiles([0.25]) == {50: 0.25, 90: 0.25, 99: 0.25}


def test_drift_between_the_window_halves():
    # first half 1.2 + 1.2 = 2.4 s, second 1.0 + 1.0 = 2.0 s: the first ran 20% slower
    first, second = method.halves([1.2, 1.2, 1.0, 1.0])
    assert (first, second) == (pytest.approx(2.4), pytest.approx(2.0))
    assert method.drift(first, second) == pytest.approx(0.2)
    # an odd count: the middle step is in neither half
    assert method.halves([1.2, 5.0, 1.0]) == (pytest.approx(1.2), pytest.approx(1.0))
    assert method.halves([1.0]) == (0.0, 0.0) and method.drift(0.0, 0.0) is None
    # slowing down: negative
    assert method.drift(1.0, 1.25) == pytest.approx(-0.2)


def test_straggler_ratio():
    # windows 1.0, 1.1, 1.0, 1.3: median (1.0 + 1.1) / 2 = 1.05; slowest 1.3: 1.3 / 1.05
    assert method.straggler_ratio([1.0, 1.1, 1.0, 1.3]) == pytest.approx(1.2380952)
    assert method.straggler_ratio([2.0]) == 1.0 and method.straggler_ratio([]) is None


def test_the_straggler_host_is_named_past_5_percent():
    hosts = ["node1", "node1", "node2", "node2"]
    # windows 1.0, 1.1, 1.0, 1.3: 1.3 / 1.05 = 1.238 > 1.05: the slowest rank is on node2
    assert method.straggler_host([1.0, 1.1, 1.0, 1.3], hosts) == "node2"
    # median 1.0, slowest 1.06: 6% longer, named; 1.05: exactly 5%, not more: none
    assert method.straggler_host([1.0, 1.0, 1.06, 1.0], hosts) == "node2"
    assert method.straggler_host([1.0, 1.05, 1.0, 1.0], hosts) is None
    # 1.1 over a median of 1.0 is 10%: named at the default, not past a 20% limit
    assert method.straggler_host([1.1, 1.0, 1.0], hosts[1:], limit=0.2) is None
    # two equally slow ranks: the first one's host
    assert method.straggler_host([1.0, 1.2, 1.0, 1.2], hosts) == "node1"
    assert method.straggler_host([], []) is None


def test_a_point_names_the_host_its_repeats_named_most():
    assert method.most_named(["node3", None, "node3", "node1"]) == ("node3", 2)
    assert method.most_named(["node1", "node3", "node3", "node1"]) == ("node1", 2)   # tie
    assert method.most_named([None, None]) == (None, 0) and method.most_named([]) == (None, 0)


@pytest.mark.parametrize("cv,n_ok,drift,kw,marks", [
    (0.06, 5, 0.0, {}, "C"),            # CV 6% > 5%
    (0.05, 5, 0.0, {}, ""),             # exactly 5%: not above
    (0.01, 2, None, {}, "N"),           # 2 ok repeats < 3
    (0.01, 3, -0.06, {}, "D"),          # the window slowed down by 6%
    (0.01, 3, 0.05, {}, ""),
    (0.10, 1, 0.10, {}, "CND"),
    (0.10, 5, 0.10, {"max_cv": 0.2, "max_drift": 0.2}, ""),
    (0.0, 0, None, {}, "N"),
])
def test_flag_rules(cv, n_ok, drift, kw, marks):
    assert method.point_flags(cv, n_ok, drift, **kw) == marks


def test_speedup_flags_and_legend():
    assert method.speedup_flags("", True) == "B" and method.speedup_flags("N", True) == "NB"
    assert method.speedup_flags("C", False) == "C"
    text = method.legend(max_cv=0.1, marks="CB")
    assert text.startswith("C = spread too wide: CV across repeats above 10%; B = ")
    assert "N =" not in text
