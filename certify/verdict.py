"""A certification's verdict: the one rule, written once (docs/certify.md, "What a verdict means").

For each point of an item, its figure on the item's metric against its baseline:

    ratio = measured / baseline        a metric where higher is better (throughput, tokens/s,
                                       MFU, TFLOP/s, bus bandwidth, checkpoint GB/s)
    ratio = baseline / measured        where lower is better (latency, memory): inverted, so
                                       the ratio is always how much of the baseline was delivered
    PASS when ratio >= threshold (default 0.95: within 5% of the baseline, or better), else FAIL

- a point that did not end ok (failed, OOM, timed out, never recorded: no figure) is FAIL,
  with or without a baseline: the cluster did not deliver;
- a point with no baseline is MEASURED: recorded, not judged, and not a failure;
- every item is NOT RUN when the health gate failed: a sick node fails the certification,
  named, and nothing is measured on it.

The certification: FAIL (exit 1) when the health gate or any point failed; PASS (exit 0)
when at least one point was judged and none failed; RECORDED (exit 0) when none was judged
(certify.baseline=none, or the items have no baseline).
"""
import math
from collections.abc import Iterable

from contract import exits, values

DEFAULT_THRESHOLD = 0.95
PASS, FAIL, MEASURED, NOT_RUN = "PASS", "FAIL", "MEASURED", "NOT RUN"
RECORDED = "RECORDED"   # the certification's, when nothing was judged
EPSILON = 1e-12          # a ratio equal to the threshold passes, whatever the rounding


def threshold_of(value: object) -> float:
    """A threshold as given (certify.threshold=, a suite's): a number > 0; ValueError else."""
    number = value
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            pass
    if values.is_number(number) and number > 0 and not math.isinf(number):
        return float(number)
    raise ValueError(f"certify.threshold must be a number > 0 (0.95: within 5% of the "
                     f"baseline), got {value!r}")


def figure(v: object) -> float | None:
    """A measured or baseline figure, or None where there is none (None, NaN)."""
    return float(v) if values.is_number(v) and not math.isnan(v) else None


def ratio(measured: float, baseline: float, lower_is_better: bool) -> float | None:
    """How much of the baseline was delivered (the rule above); None where it cannot be said
    (a baseline or, lower being better, a measurement that is not above 0)."""
    if lower_is_better:
        return baseline / measured if measured > 0 else None
    return measured / baseline if baseline > 0 else None


Judged = tuple[float | None, str, str | None]   # (ratio, verdict, why) of one point


def judge(measured: object, baseline: object, lower_is_better: bool, threshold: float,
          status: str = "ok") -> Judged:
    """(ratio, verdict, why) of one point: `status` is how it ended (a point that did not end
    ok has no figure: FAIL); `baseline` None: MEASURED."""
    got, base = figure(measured), figure(baseline)
    if status not in ("ok", "partial"):
        return None, FAIL, f"no figure: the point ended {status}"
    if got is None:
        return None, FAIL, "no figure: its records give none of this metric"
    if base is None:
        return None, MEASURED, None
    r = ratio(got, base, lower_is_better)
    if r is None:
        return None, MEASURED, f"baseline {base:g} cannot be set against {got:g}"
    return r, PASS if r + EPSILON >= threshold else FAIL, None


def overall(verdicts: Iterable[str], health_ok: bool) -> tuple[str, int]:
    """(the certification's verdict, its exit status) from its points' verdicts."""
    verdicts = list(verdicts)
    if not health_ok or FAIL in verdicts:
        return FAIL, exits.FAILED
    if PASS in verdicts:
        return PASS, exits.OK
    return RECORDED, exits.OK
