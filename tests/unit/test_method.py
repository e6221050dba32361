"""The method's arithmetic against figures computed by hand."""
import pytest

from analysis import method


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
    assert method.repeat_throughput([rec]) == pytest.approx(50.0)
    mean_of_rates = (10 / 0.1 + 10 / 0.3) / 2
    assert mean_of_rates == pytest.approx(66.67, abs=0.01)


def test_warmup_steps_do_not_count():
    rec = {"steps": [{"phase": "warmup", "samples": 1000, "start": 0, "end": 1}] +
                    [{"phase": "measure", "samples": 4, "start": 1 + i, "end": 2 + i} for i in range(3)],
           "window": {"start": 1.0, "end": 4.0}}
    assert method.rank_timing(rec) == (12, 3.0)


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
