"""torchtitan's settings of a point's layout, as both releases driven here take them (0.3.0's
configs in session.py, 0.2.2's JobConfig in v022.py): the parallel degrees and the batch."""

# torchtitan 0.3.0's default backend, spmd_types, hands FSDP2 parameters annotated for a
# fully_shard newer than torch 2.13's ("When dp_mesh_dims is provided, all parameters must be
# DTensors", seen here on the CPU); partial_dtensor is its DTensor path (parallelize_module's
# plans, FSDP2 on the data-parallel mesh), which torch 2.13 has.
SPMD_BACKEND = "partial_dtensor"
SCHEDULES = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved_1f1b": "Interleaved1F1B"}


def batch_settings(layout) -> dict:
    """TrainingConfig's batch of a layout (session.py's module docstring)."""
    local = layout.micro_batch_size * (layout.accumulation if layout.pp > 1 else 1)
    return {"local_batch_size": local, "global_batch_size": layout.global_batch_size}


def parallelism_settings(layout) -> dict:
    """torchtitan's ParallelismConfig fields of a layout (session.py's module docstring)."""
    return {"data_parallel_replicate_degree": 1 if layout.fsdp else layout.dp,
            "data_parallel_shard_degree": layout.dp if layout.fsdp else 1,
            "tensor_parallel_degree": layout.tp, "enable_sequence_parallel": layout.sequence_parallel,
            "pipeline_parallel_degree": layout.pp,
            "pipeline_parallel_schedule": SCHEDULES[layout.schedule],
            "pipeline_parallel_microbatch_size": layout.micro_batch_size,
            "context_parallel_degree": layout.cp, "expert_parallel_degree": layout.ep,
            "spmd_backend": SPMD_BACKEND}
