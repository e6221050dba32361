"""profile=true's trace (frameworks/common/profile.py: when, which rank):
tf.profiler.experimental start/stop into a TensorBoard logdir
(plugins/profile/<run>/<host>.xplane.pb: TensorBoard's profile plugin)."""
from frameworks.common.profile import STEPS


def trace(folder, steps, session) -> dict:
    import tensorflow as tf
    tf.profiler.experimental.start(folder)
    try:
        steps(STEPS)
    finally:
        tf.profiler.experimental.stop()
    return {"tool": "tf.profiler.experimental", "format": "TensorBoard logdir (profile plugin: "
            "tensorboard --logdir PATH)", "path": folder, "traced_steps": STEPS}
