"""A trace on demand (`profile=true`): a few training steps recorded with the framework's own
profiler, beside the records, in repeat-00/profile/rank-00000/ (paths.profile_dir).

When: after the timed window of the first repeat (and after its parameter checksum), as
STEPS extra steps. So the trace never skews a figure: its steps are in no window and no
step list, the profiler starts after the window's last edge, and no timed step of any
repeat runs while it is on; and it costs no extra process, allocation or compile (the
model is warm, as in the timed steps). Every rank runs the extra steps, because each step's
all-reduce needs them all; rank 0 alone records, which keeps a trace one rank's size.
What a rank's record says: `profile` = {status (ok, failed, unsupported, untraced), tool,
format, path (relative to the repeat's folder), steps, error}.

Each framework's profiler is its adapter's `tracer` (frameworks/<name>/tracer.py:
`trace(folder, steps, session) -> dict`, imported only by the rank that traces, in its own
Python): torch.profiler's Chrome trace, tf.profiler's TensorBoard logdir, jax.profiler's
Perfetto trace. A framework whose adapter declares none: status `unsupported`, and no extra
step. Standard library only here.
"""
import os
import time
from typing import Any

from contract import paths
from contract.statuses import Cancelled
from frameworks import registry

STEPS = 5
TRACING_RANK = 0
UNSUPPORTED = "no profiler hook for {fw} in the suite yet (its adapter, frameworks/{fw}/" \
              "__init__.py, declares no tracer)"


def requested(spec) -> bool:
    """profile= set (anything but false or null) in the point's config, and this is the
    first repeat."""
    value = spec.config.get("profile")
    return value is not None and value is not False and spec.repeat == 0


def after_window(session, spec, record, rank: int) -> None:
    """When asked (`requested`), run STEPS extra steps, traced on TRACING_RANK, and say so in
    record["profile"]. A profiler that fails costs only the trace (the steps still run, so
    no rank waits on another); a step that fails fails the repeat, as any step would."""
    if not requested(spec):
        return
    fw, value = spec.framework, spec.config.profile
    if value is not True:   # profile=1, profile=yes: said, not guessed
        record["profile"] = {"status": "failed", "error": f"profile must be true or false, "
                                                          f"got {value!r}"}
        return
    adapter = registry.get(fw)   # the harness's: it found it before building the session
    if adapter.tracer is None:
        record["profile"] = {"status": "unsupported", "error": UNSUPPORTED.format(fw=fw)}
        return
    done = [0]

    def steps(n):
        for _ in range(n):
            session.loss_value(session.step())  # each traced step whole: its work is done
            session.sync()
            done[0] += 1

    info: dict[str, Any] = {"status": "untraced", "steps": STEPS, "error": None}
    if rank == TRACING_RANK:
        folder = paths.profile_dir(spec.record_dir, rank)
        os.makedirs(folder, exist_ok=True)
        t0 = time.perf_counter()
        try:
            info.update(adapter.load(adapter.tracer)(folder, steps, session), status="ok")
            info["path"] = os.path.relpath(info["path"], spec.record_dir)
        except Exception as exc:  # noqa: BLE001  (the trace is lost, the figures are not)
            if isinstance(exc, Cancelled):   # SIGTERM ends the rank, traced or not
                raise
            info.update(status="failed", error=f"{type(exc).__name__}: {exc}")
        info["seconds"] = time.perf_counter() - t0
    steps(STEPS - done[0])   # untraced ranks, and what a failed profiler left undone
    record["profile"] = info
