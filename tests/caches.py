"""Where the tests keep what outlives a run (the test image, JAX's compiled programs): outside the
clone, beside the framework environments (mk/build_env.sh keeps the same rule for those).
What is kept is keyed by its content, so a fresh clone reuses it and a change misses it.

The ranks' compiled programs kept between runs: JAX's (tests/conftest.py: jax-compile/ here) and
PyTorch inductor's, in its own default /tmp/torchinductor_$USER (its C++ kernels are keyed by a
compile command naming torch's path: mk/suite_venv.sh). Not kept (measured on 2026-11-29):
- MindSpore 2.10's graph cache (MS_COMPILER_CACHE_ENABLE, MS_COMPILER_CACHE_PATH): keyed by the
  Python files and the order of compiles, not the network: a BERT point loaded ResNet-50's
  graph and failed, and a warm ResNet-50 point's first loss was nan.
- TensorFlow's XLA cache (TF_XLA_FLAGS=--tf_xla_persistent_cache_directory=...): 2.21 names an
  entry by its HLO, whose metadata holds TensorFlow's path through the clone's .venvs link, so a
  fresh clone misses (in one checkout the 2 compiled points took 26 s of CPU cold, 11 s warm);
  and TensorFlow 2.15.1's XLA fails on a CPU with the flag set.
- Paddle's to_static and OneFlow's nn.Graph: no persistent compile cache set by environment."""
import os
from pathlib import Path


def cache_root() -> Path:
    """/var/cache/dlbench as root, else the user's cache ($XDG_CACHE_HOME or ~/.cache)/dlbench."""
    if os.getuid() == 0:
        return Path("/var/cache/dlbench")
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dlbench"
