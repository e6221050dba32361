"""The measuring method's arithmetic, written once (docs/contract.md, "The method").

- Throughput of one repeat: the global samples of its timed steps divided by
  the longest rank's timed window. Never a mean of per-step rates: that mean
  weights a fast step as much as a slow one and overstates throughput whenever
  step times vary.
- A point's figure is the median over its ok repeats, with min, max and the
  coefficient of variation as its spread.
- Speedup is a point's median throughput over the 1-device point of the same
  configuration; scaling efficiency is speedup over the number of devices.
"""
import statistics


def throughput(samples_per_rank, window_s_per_rank) -> float:
    """Samples per second of one repeat, from each rank's timed samples and window."""
    samples, windows = list(samples_per_rank), list(window_s_per_rank)
    if not samples or len(samples) != len(windows):
        raise ValueError("need one sample count and one window per rank")
    longest = max(windows)
    if longest <= 0:
        raise ValueError(f"timed window must be positive, got {longest}")
    return sum(samples) / longest


def rank_timing(record: dict):
    """(timed samples, timed window in s) of one rank record."""
    return window_timing([s["samples"] for s in record["steps"] if s["phase"] == "measure"],
                         record["window"])


def window_timing(timed_samples, window: dict):
    """(timed samples, timed window in s) from the samples of a rank's timed steps (a list,
    or a numpy array: the analysis reads steps column-wise) and its window."""
    if hasattr(timed_samples, "sum"):
        samples = timed_samples.sum().item()
    else:
        samples = sum(timed_samples)
    return samples, window["end"] - window["start"]


def repeat_throughput(rank_records) -> float:
    timings = [rank_timing(r) for r in rank_records]
    return throughput([s for s, _ in timings], [w for _, w in timings])


def summarize(values) -> dict:
    """Median and spread of repeat throughputs (NaN-free input; empty gives None)."""
    values = list(values)
    if not values:
        return {"median": None, "min": None, "max": None, "cv": None, "n": 0}
    mean = statistics.fmean(values)
    cv = statistics.stdev(values) / mean if len(values) > 1 and mean else 0.0
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "cv": cv, "n": len(values)}


def speedup(value: float, baseline: float):
    return value / baseline if value is not None and baseline else None


def efficiency(speedup_value, devices: int):
    return speedup_value / devices if speedup_value is not None else None
