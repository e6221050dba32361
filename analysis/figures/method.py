"""The measuring method's arithmetic, written once (docs/contract.md, "The method";
docs/method.md), tested against hand-computed figures (tests/unit/test_method.py).

- Throughput of one repeat (`repeat_throughput`, of each rank's `rank_timing`): the
  global samples of its timed steps divided by the longest rank's timed window (the record's
  `window`). Never a mean of per-step rates: that mean weights a fast step as much as a slow one
  and overstates throughput whenever step times vary. A training repeat's
  (analysis/figures/points.py) and the input pipeline's (analysis/sections/input_pipeline.py) both
  come from here.
- A point's figure is the median over its ok repeats, with min, max and the
  coefficient of variation as its spread.
- The median's 95% confidence interval is distribution-free: the order statistics
  [x(j), x(n+1-j)] of the n sorted repeat figures, j the largest whose coverage
  P(j <= B <= n-j), B ~ Binomial(n, 1/2), is at least 95% (`median_ci`). It exists
  from 6 repeats on (j = 1: min..max covers 1 - 2^(1-n) = 96.9% at n = 6); with
  fewer no interval reaches 95% and none is given: the report shows the min..max
  range instead, in parentheses (it covers the median only 1 - 2^(1-n): 75% at 3 repeats).
- Flags (`point_flags`; MARKS): C spread too wide (CV above MAX_CV, 5%), N fewer than
  MIN_OK_REPEATS (3) ok repeats, D drift inside the timed window (the first and second
  halves of the timed steps differ by more than MAX_DRIFT, 5%: warm-up too short, or a
  clock that moved), B (speedup only) the 1-device baseline is flagged.
- Per rank step times: the p50, p90 and p99 of every timed step of every rank of the
  point's ok repeats, by nearest rank (`percentiles`: always a step that was measured);
  the straggler ratio of a repeat is its slowest rank's timed window over its median
  rank's window (`straggler_ratio`), a point's the median over its ok repeats, as its
  drift is. The slowest rank's host is named when its window is more than
  STRAGGLER_LIMIT (5%) longer than the median rank's (`straggler_host`); a point names
  the host its ok repeats named most often (`most_named`).
- Speedup is a point's median throughput over the 1-device point of the same
  configuration; scaling efficiency is speedup over the number of devices.
"""
import collections
import math
import statistics

import numpy as np

PHASES = ("warmup", "measure")   # a step's phase, only "measure" timed; its code in the columns: its index
CI_LEVEL = 0.95
MAX_CV = 0.05
MIN_OK_REPEATS = 3
MAX_DRIFT = 0.05
PERCENTILES = (50, 90, 99)
STRAGGLER_LIMIT = 0.05
# The flags' marks as the tables show them, in this order, and what each means.
MARKS = {"C": "spread too wide: CV across repeats above {max_cv:.0%}",
         "N": f"fewer than {MIN_OK_REPEATS} ok repeats",
         "D": "drift: the timed window's first and second halves differ by more than "
              "{max_drift:.0%} (warm-up too short?)",
         "B": "speedup or efficiency over a flagged 1-device baseline"}


def throughput(samples_per_rank, window_s_per_rank) -> float:
    """Samples per second of one repeat, from each rank's timed samples and window."""
    samples, windows = list(samples_per_rank), list(window_s_per_rank)
    if not samples or len(samples) != len(windows):
        raise ValueError("need one sample count and one window per rank")
    longest = max(windows)
    if longest <= 0:
        raise ValueError(f"timed window must be positive, got {longest}")
    return sum(samples) / longest


def rank_timing(timed_samples, window: dict):
    """(timed samples, timed window in s) of one rank: the samples of its timed steps (a
    list, or a numpy array: the analysis reads steps column-wise) and its record's window."""
    if hasattr(timed_samples, "sum"):
        samples = timed_samples.sum().item()
    else:
        samples = sum(timed_samples)
    return samples, window["end"] - window["start"]


def repeat_throughput(timings) -> float:
    """Samples per second of one repeat from each rank's (timed samples, timed window in s)
    (`rank_timing`): its global samples over its longest rank's window."""
    timings = list(timings)
    return throughput([s for s, _ in timings], [w for _, w in timings])


# ---- a point's figure and its confidence ---------------------------------------------------
def binomial_cdf_half(k: int, n: int) -> float:
    """P(B <= k) for B ~ Binomial(n, 1/2), exactly (integers until the one division)."""
    if k < 0:
        return 0.0
    return sum(math.comb(n, i) for i in range(min(k, n) + 1)) / 2 ** n


def median_ci_rank(n: int, level: float = CI_LEVEL):
    """(j, coverage): the largest j such that [x(j), x(n+1-j)] of n sorted values covers
    the median with probability >= level, and that probability; None when even the whole
    range (j = 1, coverage 1 - 2^(1-n)) falls short (n < 6 at 95%)."""
    best = None
    for j in range(1, n // 2 + 1):
        coverage = 1 - 2 * binomial_cdf_half(j - 1, n)
        if coverage < level:
            break
        best = (j, coverage)
    return best


def median_ci(values, level: float = CI_LEVEL) -> dict:
    """{lo, hi, coverage, j} of the median's distribution-free interval (None when it does
    not exist: fewer than 6 values at 95%)."""
    xs = sorted(values)
    found = median_ci_rank(len(xs), level)
    if found is None:
        return {"lo": None, "hi": None, "coverage": None, "j": None}
    j, coverage = found
    return {"lo": xs[j - 1], "hi": xs[len(xs) - j], "coverage": coverage, "j": j}


def summarize(values) -> dict:
    """Median and spread of repeat throughputs (NaN-free input; empty gives None), with the
    median's 95% interval where it exists (median_ci)."""
    values = list(values)
    if not values:
        return {"median": None, "min": None, "max": None, "cv": None, "n": 0,
                "ci_lo": None, "ci_hi": None, "ci_coverage": None}
    mean = statistics.fmean(values)
    cv = statistics.stdev(values) / mean if len(values) > 1 and mean else 0.0
    ci = median_ci(values)
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "cv": cv, "n": len(values), "ci_lo": ci["lo"], "ci_hi": ci["hi"],
            "ci_coverage": ci["coverage"]}


# ---- inside the timed window ----------------------------------------------------------------
def percentiles(durations, qs=PERCENTILES, overwrite: bool = False) -> dict:
    """{q: the q-th percentile} of step durations by nearest rank: the ceil(q/100 * n)-th
    smallest, a duration that was measured; None for each when there are none. `overwrite`:
    a float64 array of durations may be reordered in place (no copy of millions of steps)."""
    d = np.asarray(durations, dtype=np.float64)
    n = len(d)
    if n == 0:
        return {q: None for q in qs}
    ranks = [max(1, -(-q * n // 100)) for q in qs]   # ceil(q*n/100), in integers
    kth = sorted({r - 1 for r in ranks})
    if overwrite and d is durations and d.flags.writeable:
        d.partition(kth)
        part = d
    else:
        part = np.partition(d, kth)
    return {q: float(part[r - 1]) for q, r in zip(qs, ranks)}


def halves(durations):
    """(time of the first half, time of the second half) of one rank's timed steps, in
    order; with an odd count the middle step is in neither. (0, 0) under 2 steps."""
    d = np.asarray(durations, dtype=np.float64)
    h = len(d) // 2
    if h == 0:
        return 0.0, 0.0
    return float(d[:h].sum()), float(d[-h:].sum())


def drift(first_s: float, second_s: float):
    """How much slower the first half of a timed window ran than the second: first / second
    - 1 (+0.10: the first half took 10% longer; negative: the steps slowed down). Sums over
    ranks are the input for a repeat. None when the second half is empty."""
    return first_s / second_s - 1 if second_s > 0 else None


def straggler_ratio(windows):
    """The slowest rank's timed window over the median rank's (1.0: no straggler)."""
    windows = list(windows)
    if not windows:
        return None
    median = statistics.median(windows)
    return max(windows) / median if median > 0 else None


def straggler_host(windows, hosts, limit: float = STRAGGLER_LIMIT):
    """The host of the slowest rank (the first of equals) when its timed window is more than
    `limit` longer than the median rank's (straggler ratio above 1 + limit), else None."""
    windows, hosts = list(windows), list(hosts)
    ratio = straggler_ratio(windows)
    if ratio is None or not ratio > 1 + limit:
        return None
    return hosts[windows.index(max(windows))]


def most_named(hosts):
    """(the host named most often, how often) among the repeats' straggler hosts (None: not
    named); the first named wins a tie; (None, 0) when none is named."""
    counts = collections.Counter(h for h in hosts if isinstance(h, str))
    return counts.most_common(1)[0] if counts else (None, 0)   # ties: the first counted


def median_of(values):
    """The median of the values that are not None or NaN, or None."""
    values = [v for v in values if v is not None and v == v]
    return statistics.median(values) if values else None


# ---- flags ----------------------------------------------------------------------------------
def point_flags(cv, n_ok: int, drift_value, max_cv: float = MAX_CV,
                max_drift: float = MAX_DRIFT, min_ok: int = MIN_OK_REPEATS) -> str:
    """The marks of a point's figure (MARKS): "" when nothing is wrong, else some of "CND"."""
    marks = ""
    if cv is not None and cv == cv and cv > max_cv:
        marks += "C"
    if n_ok < min_ok:
        marks += "N"
    if drift_value is not None and drift_value == drift_value and abs(drift_value) > max_drift:
        marks += "D"
    return marks


def speedup_flags(own: str, baseline_flagged: bool) -> str:
    """A speedup's marks: its point's own, and B when its 1-device baseline is flagged."""
    return (own or "") + ("B" if baseline_flagged else "")


def legend(max_cv: float = MAX_CV, max_drift: float = MAX_DRIFT, marks=None) -> str:
    """One line: what each mark means (only those in `marks`, when given)."""
    shown = [m for m in MARKS if marks is None or m in marks]
    return "; ".join(f"{m} = {MARKS[m].format(max_cv=max_cv, max_drift=max_drift)}" for m in shown)


def speedup(value: float | None, baseline: float | None) -> float | None:
    return value / baseline if value is not None and baseline else None


def efficiency(speedup_value, devices: int):
    return speedup_value / devices if speedup_value is not None else None
