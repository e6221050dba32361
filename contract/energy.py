"""Energy of the timed window, MLPerf Power's question (joules per sample): the one rule.

A GPU rank reads NVML's energy counter (nvmlDeviceGetTotalEnergyConsumption: millijoules
since the driver loaded, the whole board, Volta and newer) at its timed window's two edges,
after the syncs that bound the window (frameworks/common/nvml_energy.py); `rank_window`
turns the two readings into the record's `energy`. A repeat's energy per sample is its ranks'
window energies summed over their timed samples summed (`repeat_energy`: the global samples,
as throughput counts them), a language model's per token that over its sequence length
(`per_token`); its mean power per device is the mean of the ranks' energy / window. A point's
figures are the medians over its ok repeats (`point_energy`).

Resolution. The counter advances in steps, about every 100 ms on NVIDIA's datacenter GPUs
(ml.energy's measurements with Zeus; pynvml's own test saw about 10 ms on another GPU), so
each edge may read a value up to one update old: a window's figure may be off by up to two
updates' energy. A window shorter than MIN_WINDOW_S (MIN_UPDATES updates of UPDATE_PERIOD_S:
2 s, so at most 10%) is flagged `too_short`; a counter that did not advance at all (a window
shorter than one update) gives no figure. Where the counter cannot be read (a CPU, a
container without access to NVML, a GPU without the counter) every figure is null and
`reason` says why: never a guess. Standard library only: ranks import it.
"""
import statistics
from collections.abc import Iterable
from typing import Any, Optional

Energy = dict[str, Any]   # the record's `energy` of a rank, or a repeat's or point's figures

COUNTER = "nvmlDeviceGetTotalEnergyConsumption"
UPDATE_PERIOD_S = 0.1
MIN_UPDATES = 20
MIN_WINDOW_S = UPDATE_PERIOD_S * MIN_UPDATES
NO_RECORD = "no energy in the record (a bench without a training window, or a record older than the field)"


def unread(reason: Optional[str], device: Optional[str] = None) -> Energy:
    """The record's `energy` where the counter gave no figure, `reason` saying why."""
    return {"counter": COUNTER, "device": device, "start_mj": None, "end_mj": None,
            "window_s": None, "energy_j": None, "mean_power_w": None, "too_short": None,
            "reason": reason}


def rank_window(start_mj: int, end_mj: int, window_s: float, device: Optional[str] = None) -> Energy:
    """The record's `energy` of one rank from the counter's two readings (mJ) and the timed
    window's seconds: energy_j, mean_power_w (energy / window), too_short, or null figures
    with the reason where the readings give none."""
    out = unread(None, device)
    out.update(start_mj=start_mj, end_mj=end_mj, window_s=window_s)
    delta = end_mj - start_mj
    if not window_s > 0:
        out["reason"] = f"the timed window lasted {window_s} s"
    elif delta < 0:
        out["reason"] = (f"the counter went back {-delta} mJ in the window "
                         "(the driver reloaded?)")
    elif delta == 0:
        out.update(too_short=True, reason=(
            f"the counter did not advance in a {window_s:.3f} s window (it updates about "
            f"every {UPDATE_PERIOD_S:g} s)"))
    else:
        out.update(energy_j=delta / 1e3, mean_power_w=delta / 1e3 / window_s,
                   too_short=window_s < MIN_WINDOW_S)
    return out


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def repeat_energy(ranks: Iterable[tuple[Optional[Energy], int]]) -> Energy:
    """{energy_j, energy_per_sample_j, power_per_device_w, energy_too_short, energy_reason}
    (a repeat's row in runs.csv) of one repeat
    from each rank's (record's `energy` or None, timed samples): the ranks' energies summed
    over their samples summed; the mean of their mean powers. One rank without a figure
    leaves the repeat without one (a sum of some devices is no repeat's energy): the
    figures are null and `energy_reason` gives the ranks' reasons, each once."""
    ranks = list(ranks)
    reasons = []
    for energy, _ in ranks:
        if not isinstance(energy, dict):
            reasons.append(NO_RECORD)
        elif not (_number(energy.get("energy_j")) and _number(energy.get("mean_power_w"))):
            reasons.append(str(energy.get("reason") or "malformed energy in the record"))
    samples = sum(s for _, s in ranks)
    if not ranks or samples <= 0:
        reasons.append("no timed samples")
    if reasons:
        return {"energy_j": None, "energy_per_sample_j": None, "power_per_device_w": None,
                "energy_too_short": None, "energy_reason": "; ".join(dict.fromkeys(reasons))}
    figures = [e for e, _ in ranks if e is not None]   # every one: no reason above
    total = sum(e["energy_j"] for e in figures)
    return {"energy_j": total, "energy_per_sample_j": total / samples,
            "power_per_device_w": sum(e["mean_power_w"] for e in figures) / len(figures),
            "energy_too_short": any(bool(e.get("too_short")) for e in figures),
            "energy_reason": None}


def point_energy(repeats: Iterable[Energy]) -> Energy:
    """{energy_per_sample_j, power_per_device_w, energy_too_short, energy_reason} of a point
    from its ok repeats' `repeat_energy` figures: the medians over the repeats that have one;
    too short where any of them was; the reason where none has a figure."""
    repeats = list(repeats)
    have = [r for r in repeats if _number(r.get("energy_per_sample_j"))]
    if not have:
        reasons = [str(r["energy_reason"]) for r in repeats if r.get("energy_reason")]
        return {"energy_per_sample_j": None, "power_per_device_w": None,
                "energy_too_short": None,
                "energy_reason": "; ".join(dict.fromkeys(reasons)) or None}
    return {"energy_per_sample_j": statistics.median(r["energy_per_sample_j"] for r in have),
            "power_per_device_w": statistics.median(r["power_per_device_w"] for r in have),
            "energy_too_short": any(bool(r.get("energy_too_short")) for r in have),
            "energy_reason": None}


def per_token(energy_per_sample_j: object, seq_len: Optional[int]) -> Optional[float]:
    """A language model's joules per token: per sample (a sequence) over its length."""
    if not _number(energy_per_sample_j) or not seq_len:
        return None
    return float(energy_per_sample_j) / seq_len  # type: ignore[arg-type]  # _number said so
