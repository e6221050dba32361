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

Each framework's profiler (imported only by the rank that traces, in its own Python):
- pytorch: torch.profiler, CPU (and CUDA) activities; its first step warms the profiler up
  (schedule warmup=1) and is left out; a Chrome trace JSON (chrome://tracing, Perfetto);
- tensorflow: tf.profiler.experimental start/stop into a TensorBoard logdir
  (plugins/profile/<run>/<host>.xplane.pb: TensorBoard's profile plugin);
- jax: jax.profiler.trace with create_perfetto_trace=True, a TensorBoard logdir holding
  perfetto_trace.json.gz (ui.perfetto.dev) and the xplane.pb.
Other frameworks: status `unsupported`, and no extra step. Standard library only here.
"""
import glob
import os
import time

from contract import paths
from contract.statuses import Cancelled

STEPS = 5
TRACING_RANK = 0
UNSUPPORTED = "no profiler hook for {fw} in the suite yet (frameworks/common/profile.py " \
              "traces pytorch, tensorflow and jax)"


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
    tracer = TRACERS.get(fw)
    if value is not True:   # profile=1, profile=yes: said, not guessed
        record["profile"] = {"status": "failed", "error": f"profile must be true or false, "
                                                          f"got {value!r}"}
        return
    if tracer is None:
        record["profile"] = {"status": "unsupported", "error": UNSUPPORTED.format(fw=fw)}
        return
    done = [0]

    def steps(n):
        for _ in range(n):
            session.loss_value(session.step())  # each traced step whole: its work is done
            session.sync()
            done[0] += 1

    info = {"status": "untraced", "steps": STEPS, "error": None}
    if rank == TRACING_RANK:
        folder = paths.profile_dir(spec.record_dir, rank)
        os.makedirs(folder, exist_ok=True)
        t0 = time.perf_counter()
        try:
            info.update(tracer(folder, steps, session), status="ok")
            info["path"] = os.path.relpath(info["path"], spec.record_dir)
        except Exception as exc:  # noqa: BLE001  (the trace is lost, the figures are not)
            if isinstance(exc, Cancelled):   # SIGTERM ends the rank, traced or not
                raise
            info.update(status="failed", error=f"{type(exc).__name__}: {exc}")
        info["seconds"] = time.perf_counter() - t0
    steps(STEPS - done[0])   # untraced ranks, and what a failed profiler left undone
    record["profile"] = info


def _torch(folder, steps, session) -> dict:
    from torch.profiler import ProfilerActivity, profile, schedule
    path = os.path.join(folder, paths.TORCH_TRACE)
    cuda = session.cuda   # every PyTorch session says whether its rank is on a GPU
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=STEPS - 1),
                 on_trace_ready=lambda prof: prof.export_chrome_trace(path)) as prof:
        for _ in range(STEPS):
            steps(1)
            prof.step()
    return {"tool": "torch.profiler", "format": "Chrome trace JSON (chrome://tracing, "
            "ui.perfetto.dev)", "path": path, "traced_steps": STEPS - 1}


def _tensorflow(folder, steps, session) -> dict:
    import tensorflow as tf
    tf.profiler.experimental.start(folder)
    try:
        steps(STEPS)
    finally:
        tf.profiler.experimental.stop()
    return {"tool": "tf.profiler.experimental", "format": "TensorBoard logdir (profile plugin: "
            "tensorboard --logdir PATH)", "path": folder, "traced_steps": STEPS}


def _jax(folder, steps, session) -> dict:
    import jax
    with jax.profiler.trace(folder, create_perfetto_trace=True):
        steps(STEPS)
    found = sorted(glob.glob(os.path.join(folder, "plugins", "profile", "*",
                                          paths.JAX_PERFETTO_TRACE)))
    if found:
        return {"tool": "jax.profiler", "format": "Perfetto trace (ui.perfetto.dev), in a "
                "TensorBoard logdir", "path": found[-1], "traced_steps": STEPS}
    return {"tool": "jax.profiler", "format": "TensorBoard logdir (profile plugin)",
            "path": folder, "traced_steps": STEPS}


TRACERS = {"pytorch": _torch, "tensorflow": _tensorflow, "jax": _jax}
