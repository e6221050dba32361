"""A certification's one rule (certify/verdict.py) against figures computed by hand: the ratio,
lower-is-better inverted, the threshold's edges, points without a baseline or a figure, and
the certification's verdict and exit status."""
import pytest

from certify import verdict as rule


@pytest.mark.parametrize("measured, baseline, lower, threshold, ratio, word", [
    (950.0, 1000.0, False, 0.95, 0.95, "PASS"),          # 950 / 1000 = 0.95: at the threshold
    (949.0, 1000.0, False, 0.95, 0.949, "FAIL"),         # 949 / 1000 = 0.949 < 0.95
    (1200.0, 1000.0, False, 0.95, 1.2, "PASS"),          # better than the baseline
    (10.0, 8.0, True, 0.95, 0.8, "FAIL"),                # latency 10 ms against 8 ms: 8 / 10 = 0.8
    (8.4, 8.0, True, 0.95, 8.0 / 8.4, "PASS"),           # 8 / 8.4 = 0.952 >= 0.95
    (8.5, 8.0, True, 0.95, 8.0 / 8.5, "FAIL"),           # 8 / 8.5 = 0.941
    (6.0, 8.0, True, 0.95, 8.0 / 6.0, "PASS"),           # faster than the baseline: 1.333
    (100.0, 100.0, False, 1.5, 1.0, "FAIL"),             # a threshold above 1 asks for more
    (150.0, 100.0, False, 1.5, 1.5, "PASS"),
    (11.0, 100.0, False, 0.1, 0.11, "PASS"),             # a loose threshold
    (0.3, 0.3, False, 0.95, 1.0, "PASS"),                # 0.3 / 0.3 is 1 exactly
])
def test_the_ratio_and_the_threshold_by_hand(measured, baseline, lower, threshold, ratio, word):
    r, verdict, why = rule.judge(measured, baseline, lower, threshold)
    assert r == pytest.approx(ratio, rel=1e-12) and verdict == word and why is None


def test_a_ratio_equal_to_the_threshold_passes_whatever_the_rounding():
    # 0.1 + 0.2 = 0.30000000000000004: a ratio one rounding below 0.3 is 0.3
    assert rule.judge(0.3, 1.0, False, 0.1 + 0.2)[1] == "PASS"
    assert rule.judge(0.2999, 1.0, False, 0.3)[1] == "FAIL"


def test_a_point_without_a_baseline_is_measured_not_judged():
    assert rule.judge(123.0, None, False, 0.95) == (None, "MEASURED", None)
    assert rule.judge(123.0, float("nan"), False, 0.95) == (None, "MEASURED", None)
    r, word, why = rule.judge(0.0, 0.0, False, 0.95)      # a baseline of 0 cannot be divided by
    assert (r, word) == (None, "MEASURED") and why == "baseline 0 cannot be set against 0"


def test_a_point_that_did_not_end_ok_fails_with_or_without_a_baseline():
    assert rule.judge(None, 100.0, False, 0.95) == (None, "FAIL", "no figure: its records give none of this metric")
    assert rule.judge(None, None, False, 0.95)[1] == "FAIL"
    assert rule.judge(50.0, None, False, 0.95, status="oom") == (None, "FAIL", "no figure: the point ended oom")
    assert rule.judge(100.0, 100.0, False, 0.95, status="partial")[1] == "PASS"   # some repeats ok


def test_the_certifications_verdict_and_exit_status():
    assert rule.overall(["PASS", "MEASURED"], True) == ("PASS", 0)
    assert rule.overall(["PASS", "FAIL", "MEASURED"], True) == ("FAIL", 1)
    assert rule.overall(["MEASURED", "MEASURED"], True) == ("RECORDED", 0)
    assert rule.overall(["NOT RUN"], False) == ("FAIL", 1)      # the health gate failed
    assert rule.overall(["PASS"], False) == ("FAIL", 1)


@pytest.mark.parametrize("given, ok", [("0.95", 0.95), (1.5, 1.5), ("2", 2.0), ("0", None),
                                       ("-1", None), ("nan", None), ("inf", None), ("x", None),
                                       (True, None)])
def test_a_threshold_is_a_number_above_zero(given, ok):
    if ok is None:
        with pytest.raises(ValueError, match=r"certify.threshold must be a number > 0"):
            rule.threshold_of(given)
    else:
        assert rule.threshold_of(given) == ok
