"""The report's "Why a step takes its time" section (docs/anatomy.md): for every GPU point whether
its steps are host-bound, by how far its device trails its host (analysis/figures/host_bound.py:
the points table's host_lag and host_bound), and for every point profile=true traced the
trace's split into compute, communication not hidden by compute, other non-compute and idle
(HTA's temporal breakdown: analysis/figures/trace_split.py). A trace that cannot be read is one
line here and costs nothing else."""
from analysis import tables
from analysis.figures import host_bound, trace_split
from analysis.read import trace_file

HEADERS = ["point", "device", "steps", "device trails host (steps)"]


def section(results) -> str:
    points = results.points
    rows = []
    if "host_bound" in points:
        for row in points.itertuples(index=False):
            if host_bound.is_cpu(row.device) or tables.missing(row.host_bound):
                continue
            rows.append([row.point, row.device, row.host_bound, tables.number(row.host_lag, ".2f")])
    traced = trace_file.splits(results)
    if not rows and not traced:
        return ""
    lines = ["## Why a step takes its time (docs/anatomy.md)"]
    if rows:
        cpus = int(sum(host_bound.is_cpu(device) for device in points.device))
        lines += [f"Host-bound where the device ends each step under {host_bound.STARVED_STEPS} of a step "
                  f"after the host enqueued it, device-bound where it trails by {host_bound.BUSY_STEPS:g} "
                  "or more (the median over the window's second half, read without a sync)"
                  + (f"; {cpus} CPU point(s): host and device are one, no verdict" if cpus else "") + ".",
                  "", tables.github(rows, HEADERS)]
    if traced:
        lines += ["", "Traces (profile=true), rank 0's GPU time:"]
        for trace in traced:
            said = trace["error"] or trace_split.text(trace["split"])
            lines.append(f"- {trace['point']} repeat {trace['repeat']}: {said}")
    return "\n".join(lines)
