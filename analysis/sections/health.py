"""The report's "Nodes left out by preflight" section: for each point run with
preflight=true whose health checks left a node out (launchers/health/preflight.py), which nodes and
why, where it ran in the end, or that it found too few healthy nodes (`unhealthy`, no
repeat): each point's preflight record as analysis.load read it (Results.preflights)."""
from contract import statuses


def section(results) -> str:
    lines = []
    for (sweep, point), pre in sorted(results.preflights.items()):
        if not (pre.get("excluded") or pre.get("outcome") == statuses.UNHEALTHY):
            continue
        out = "; ".join(f"{node} ({', '.join(why)})" for node, why in sorted(pre["excluded"].items()))
        if pre.get("outcome") == statuses.UNHEALTHY:
            lines.append(f"- {point}: {statuses.UNHEALTHY}, no repeat ran: {pre.get('error')}")
            continue
        last = (pre.get("attempts") or [{}])[-1]
        ran = f"ran on {', '.join(last.get('nodes') or [])}; " if last.get("ok") else ""
        lines.append(f"- {point}: {ran}left out {out}")
    if not lines:
        return ""
    return "\n".join(["## Nodes left out by preflight (preflight=true; docs/health.md)", *lines])
