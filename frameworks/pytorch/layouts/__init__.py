"""A model split over a point's grid, with PyTorch's own distributed libraries, whatever the
model (frameworks/pytorch/models/ say how each model splits, by its `tp_plan`):
parallelize.py (DeviceMesh, tensor parallelism, the pipeline, FSDP2 or DDP, the parameters
filled), context_parallel.py (a sequence split over cp ranks), expert_parallel.py (routed experts
over ep ranks), sharded_embedding.py (a table split by rows, Wide & Deep's) and tensor_memory.py
(a CPU rank's peak of live tensor bytes). The session over them: frameworks/pytorch/lm_session.py.
"""
