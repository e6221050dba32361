"""JAX with Flax and Optax (docs/frameworks/jax.md): the training session (worker.py) and
grain's data=files pipeline (loader.py)."""
from frameworks.registry import Adapter, Bench

ADAPTER = Adapter(
    "jax",
    {"train": Bench(".worker:JaxSession", files=".worker:FilesSession"),
     "input": Bench(".loader:InputSession")},
    oom=".worker:JaxSession.is_oom",
    data_backends=("grain",),
    package=__name__)
