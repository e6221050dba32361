"""profile=true's trace (frameworks/common/profile.py: when, which rank): jax.profiler.trace
with create_perfetto_trace=True, a TensorBoard logdir holding perfetto_trace.json.gz
(ui.perfetto.dev) and the xplane.pb."""
import glob
import os

from contract import paths
from frameworks.common.profile import STEPS


def trace(folder, steps, session) -> dict:
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
