"""JAX with Flax and Optax (docs/frameworks/jax.md): the training session (worker.py),
grain's data=files pipeline (loader.py) and profile=true's trace (tracer.py)."""
from frameworks.registry import RANKS, Adapter, Bench, Modes, Precision, Release

ADAPTER = Adapter(
    "jax",
    {"train": Bench(".worker:JaxSession", files=".worker:FilesSession"),
     "input": Bench(".loader:InputSession")},
    oom=".worker:JaxSession.is_oom",
    data_backends=("grain",),
    import_name="jax",
    releases=(Release("jax", "0.4.38", "the oldest run here (tests/versions/jax-0.4.38, as late-2024 "
                              "images carry it); one rank"),
              Release("jaxlib", "0.4.38", "jax's compiled half, of jax's release"),
              Release("jax", "0.8.2", "jax.lax.pcast (each rank's own gradient under jax.shard_map) "
                              "and the jax_enable_preemption_service option, both new in 0.8.2",
                      when=RANKS),
              Release("flax", "0.10.2", "flax.linen's modules; the oldest run here, with jax 0.4.38"),
              Release("optax", "0.2.4", "the oldest run here, with jax 0.4.38")),
    modes=Modes("eager", "jit", auto=True),
    precision=Precision(gpu={"fp16": "JAX AMP runs bf16 only: fp16 needs loss scaling, which neither "
                                     "JAX nor Optax provides"}),
    tracer=".tracer:trace",
    layouts=False,
    models=("resnet50", "bert_base"),
    colour="#6a4c93",
    preload=(),  # its ranks run in their own interpreter (.venvs/jax): each starts whole
    package=__name__)
