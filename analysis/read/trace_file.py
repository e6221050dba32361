"""A profile=true trace (frameworks/common/profile.py) read for its GPU events: a Chrome or Kineto
trace JSON (torch.profiler's `trace.json.gz`, or an older sweep's plain `trace.json`).

Read only where the report is made, and only when asked: a trace is megabytes, the records
are not, so `analysis.load` never opens one. A trace that cannot be read is a TraceError with
one line that says why; it costs only its own figure.
"""
import gzip
import json
import os

import pandas as pd

from analysis.figures import trace_split
from contract import paths

# The GPU's own events: kernels, copies and memsets, each on a stream (HTA's GPU kernels);
# not the CPU's operators, not gpu_user_annotation (a span over others, no work of its own).
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


class TraceError(ValueError):
    """A trace that cannot be read: its message is one line."""


def path_of(sweep: str, point: str, repeat: int, profile: dict) -> str:
    """Where a rank record's `profile` says its trace is (relative to its repeat's folder)."""
    rdir = paths.repeat_dir(paths.point_dir(sweep, point), repeat)
    return os.path.abspath(os.path.join(rdir, str(profile.get("path"))))


def gpu_events(path: str) -> pd.DataFrame:
    """The trace's GPU events: name, cat, ts, dur (microseconds) and stream; TraceError when the
    file is missing, torn, not a trace, or its events are malformed."""
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as f:
            data = json.loads(f.read())
    except OSError as exc:   # missing, unreadable, or not gzip
        raise TraceError(f"trace {path} cannot be read: {exc.strerror or exc}") from None
    except (ValueError, EOFError) as exc:   # torn or not JSON (a truncated gzip: EOFError)
        raise TraceError(f"trace {path} is not a whole JSON trace: {str(exc).splitlines()[0]}") from None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise TraceError(f"trace {path} has no traceEvents list")
    gpu = [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES]
    try:
        frame = pd.DataFrame({"name": [str(e.get("name", "")) for e in gpu],
                              "cat": [e["cat"] for e in gpu],
                              "ts": pd.to_numeric([e["ts"] for e in gpu]),
                              "dur": pd.to_numeric([e.get("dur", 0) for e in gpu]),
                              "stream": [(e.get("args") or {}).get("stream") for e in gpu]})
    except (KeyError, TypeError, ValueError) as exc:
        raise TraceError(f"trace {path} has a malformed GPU event: {type(exc).__name__}: {exc}") from None
    return frame


def splits(results) -> list:
    """Each ok trace of the results' records (rank 0's, profile=true) with its split
    (analysis/figures/trace_split.py): {sweep, point, repeat, path, split, error}; `split` None
    and `error` one line where the trace cannot be read (or None with no error: no GPU
    kernels in it, a CPU's trace)."""
    out = []
    for e in results.environments:
        info = e.get("profile")
        if not info or info.get("status") != "ok" or not info.get("path"):
            continue
        path = path_of(e["sweep"], e["point"], e["repeat"], info)
        entry = {"sweep": e["sweep"], "point": e["point"], "repeat": e["repeat"], "path": path,
                 "split": None, "error": None}
        try:
            entry["split"] = trace_split.split(gpu_events(path))
        except TraceError as exc:
            entry["error"] = str(exc)
        out.append(entry)
    return out
