"""JAX with Flax and Optax (docs/frameworks/jax.md): the training session (worker.py),
grain's data=files pipeline (loader.py) and profile=true's trace (tracer.py)."""
from frameworks.registry import Adapter, Bench, Modes, Precision

ADAPTER = Adapter(
    "jax",
    {"train": Bench(".worker:JaxSession", files=".worker:FilesSession"),
     "input": Bench(".loader:InputSession")},
    oom=".worker:JaxSession.is_oom",
    data_backends=("grain",),
    import_name="jax",
    modes=Modes("eager", "jit", auto=True),
    precision=Precision(gpu={"fp16": "JAX AMP runs bf16 only: fp16 needs loss scaling, which neither "
                                     "JAX nor Optax provides"}),
    tracer=".tracer:trace",
    layouts=False,
    package=__name__)
