"""What one repeat's ranks read (repeat-NN/spec.json, a contract.spec.RunSpec): the point's
settings, the repeat, where to write. The driver writes it before each repeat
(launchers/driver/repeats.py)."""
from contract.point import Point
from contract.spec import RunSpec
from frameworks import registry


def of(point: Point, repeat: int) -> RunSpec:
    """What one repeat's workers read: the point's settings, the repeat, where to write."""
    return RunSpec(
        point=point.name, repeat=repeat, framework=point.framework.name, model=point.model,
        precision=point.precision, batch_size=point.batch_size, warmup_steps=point.warmup_steps,
        measure_steps=point.measure_steps, record_dir=point.repeat_dir(repeat), bench=point.bench,
        bench_options=point.bench_options, amp_dtype=point.amp_dtype, compile=point.compile,
        compile_setting=point.compile_setting, device=point.device,
        mode=point.mode or registry.get(point.framework.name).modes.name(point.compile),
        seed=point.seed, rendezvous_timeout_s=point.rendezvous_timeout_s,
        options=point.framework.options, memory_limit_mb=point.memory_limit_mb,
        parallel=point.parallel, suite_commit=point.suite_commit, config=point.config,
        container=point.container)
