"""Whether a GPU point's steps are host-bound: how far its device trails its host (docs/anatomy.md,
the rule's one home).

For each timed step i of a rank, two times from the rank's record, both read without a sync
inside the window: h_i, when the host returned from enqueuing step i (the step's `enqueued`),
and d_i, when the device finished it (the step's `end`, a CUDA event). The device's step is
the median of d_i - d_(i-1); the rank's lag, in steps, is the median over the window's second
half (the queue has filled by then) of (d_i - h_i) / that step. A device many steps behind
had work queued all along: it is busy, the steps are device-bound. One that ends each step
just after the host enqueued it had nothing queued: it waited on the host, the steps are
host-bound. In between, neither dominates: balanced.

Two kinds of point are not judged by lag: a CPU's (host and device are one: `cpu`), and one
whose steps wait on the device each step (the rank's `step_sync`, measured by the framework:
frameworks/pytorch/sync_probe.py): the host is then held to the device's pace whoever is
slower, so a small lag says nothing (`synced each step`). A point whose records hold no
enqueue times (a framework whose step ends are the host's, or an older suite) is `not
recorded`.
"""
import numpy as np

from analysis.figures import method

BUSY_STEPS = 1.0       # at least a whole step queued when the device ends one: device-bound
STARVED_STEPS = 0.5    # under half a step behind: the device waited on the host: host-bound
MIN_STEPS = 3          # timed steps a rank needs for a lag (two device steps, a second half)

CPU, SYNCED, NOT_RECORDED = "cpu", "synced each step", "not recorded"
HOST_BOUND, DEVICE_BOUND, BALANCED = "host-bound", "device-bound", "balanced"


def rank_lag(enqueued, ends):
    """How many steps one rank's device trails its host over its timed steps (`enqueued`:
    the host's end of enqueuing each, `ends`: the device's end of each, seconds on one clock),
    or None: too few steps, a time missing, or a device step of no length."""
    h, d = np.asarray(enqueued, np.float64), np.asarray(ends, np.float64)
    if len(d) < MIN_STEPS or len(h) != len(d) or not (np.isfinite(h).all() and np.isfinite(d).all()):
        return None
    step = float(np.median(np.diff(d)))
    if not step > 0:
        return None
    half = len(d) // 2
    return float(np.median((d[half:] - h[half:]) / step))


def is_cpu(device) -> bool:
    return isinstance(device, str) and device.strip().lower() == "cpu"


def combined_syncs(values):
    """One answer from several ranks' or repeats' (True, False or None each): True where any
    step waited on the device, False where every one was asked and none did, else None."""
    values = list(values)
    if any(v is True for v in values):
        return True
    return False if values and all(v is False for v in values) else None


def verdict(device, lag, syncs) -> str:
    """A point's (or a repeat's) verdict from its device's name, its lag in steps (None: not
    recorded) and whether its steps wait on the device (True, False, None: not asked)."""
    if is_cpu(device):
        return CPU
    if syncs is True:
        return SYNCED
    if lag is None:
        return NOT_RECORDED
    if lag >= BUSY_STEPS:
        return DEVICE_BOUND
    return HOST_BOUND if lag < STARVED_STEPS else BALANCED


def repeat_lag(ranks: dict, cols: dict, measure: dict) -> dict:
    """A repeat's {host_lag, step_syncs}: the median of its ranks' lags (None where none has
    one) and their `step_sync` answers combined (`ranks`: rank -> the record without its
    steps, `enqueued` among them where recorded; `cols`: its step columns; `measure`: its
    timed steps' mask)."""
    lags = []
    for r, rec in ranks.items():
        enqueued = rec.get("enqueued")
        if enqueued is not None:
            lag = rank_lag(enqueued[measure[r]], cols[r]["end"][measure[r]])
            if lag is not None:
                lags.append(lag)
    asked = [rec["step_sync"] for rec in ranks.values() if isinstance(rec.get("step_sync"), dict)]
    if not asked and all(rec.get("enqueued") is None for rec in ranks.values()):
        return {}   # nothing recorded (a CPU's, an older suite's): no such columns in runs.csv
    return {"host_lag": method.median_of(lags),
            "step_syncs": combined_syncs(a.get("syncs") for a in asked) if asked else None}


def point_verdict(device, runs: list) -> dict:
    """A point's {host_lag, host_bound} from its ok repeats' rows (host_lag, step_syncs)."""
    ok = [r for r in runs if r.get("status") == "ok"]
    lag = method.median_of(r.get("host_lag") for r in ok)
    syncs = combined_syncs(r.get("step_syncs") for r in ok)
    return {"host_lag": lag, "host_bound": verdict(device, lag, syncs) if ok else None}


def where_judged(points):
    """The points table with its host_lag and host_bound columns only where some point is not a
    CPU's (a CPU-only sweep's tables stay as they were before the rule)."""
    if "host_bound" in points and not any(isinstance(v, str) and v != CPU for v in points["host_bound"]):
        points = points.drop(columns=["host_lag", "host_bound"])
    return points
