"""A decoder language model's training session at any layout (dp x tp x pp, FSDP, a pipeline
schedule, micro-batches): the harness's surface over frameworks/pytorch/layouts/parallelize.py's split
model. The model is a family module (frameworks/pytorch/models/gpt.py says what one provides).

One iteration trains on the global batch: each data-parallel rank takes its rows of it (the
same rows whatever the layout, frameworks/pytorch/models/gpt.py), in `accumulation` micro-batches,
through the pipeline schedule where there is one, else one after another with the gradient
all-reduce (DDP) or reduce-scatter (FSDP) on the last. The loss a rank records is the
iteration's loss over the whole global batch, as Megatron-LM logs it: averaged over the
data-parallel ranks, from the last pipeline stage. The samples a rank counts are its replica's
on one rank of each data-parallel replica (tp 0 and cp 0 of the last stage) and none
elsewhere, so that the method's throughput (the sum over ranks, over the longest window) is the
global batch's. With context parallelism a rank trains on its part of each sequence
(frameworks/pytorch/layouts/context_parallel.py) and the loss is averaged over dp x cp. A mixture of
experts (its spec's `experts`, contract/models/) has its experts split over ep ranks
(frameworks/pytorch/layouts/expert_parallel.py), its load balanced before each optimizer step, and
its load and all-to-all seconds per step in the record's `moe` (frameworks/pytorch/models/moe.py).
Standard library + torch only.
"""
import contextlib
import statistics
import time
from typing import Any

import torch
import torch.distributed as torch_dist
from torch.distributed.tensor.parallel import loss_parallel

from frameworks.common import accelerator, capability
from contract import modes, parallel
from contract.models import get as spec_of
from frameworks.pytorch import models
from frameworks.pytorch.layouts import context_parallel, expert_parallel, parallelize, tensor_memory
from frameworks.pytorch.models import moe
from frameworks.pytorch.session import DTYPES, TorchSession, setup_device


def layout_gap(layout: parallel.Layout, amp_dtype):
    """Why this point's layout cannot run here, or None: decided before the model is built."""
    if amp_dtype == "fp16" and not (layout.tp == layout.pp == 1 and not layout.fsdp):
        return ("fp16 AMP with tensor, pipeline or FSDP parallelism is not built here (its loss "
                "scale would have to agree across shards and stages): use precision.amp_dtype=bf16")
    return None


class LMSession(TorchSession):
    family: Any = None  # the model family module (session_of makes one class per family)
    implementation_reason = None   # why this definition ran, not torchtitan's (titan.choose)

    def __init__(self, spec, dist):
        self.dist, self.layout = dist, spec.parallel
        self._devices(spec)
        torch.manual_seed(spec.seed)  # dropout draws the same stream on every rank
        mesh = self._mesh()
        self._model(spec, mesh)
        self._batch(spec)
        self._optimizer(spec, mesh)

    # ---- construction, in order ---------------------------------------------------------
    def _devices(self, spec):
        """The device and the process group; the AMP dtype, and the layout's refusal where
        it cannot run here."""
        layout, dist = self.layout, self.dist
        self.device, self.cuda = setup_device(spec, dist, group=self._mesh_needed())
        dtype = accelerator.amp_dtype(spec, self.cuda)
        gap = layout_gap(layout, dtype)
        if gap:
            raise capability.Unsupported(gap)
        self.amp, self.amp_dtype = dtype is not None, DTYPES[dtype]
        self.scaler = torch.amp.GradScaler("cuda", enabled=dtype == "fp16")
        self.coords = parallel.coords(dist.rank, self.layout)

    def _mesh_needed(self) -> bool:
        return self.dist.world_size > 1 or self.layout.fsdp

    def _mesh(self):
        """The device mesh of the layout's grid; None for one rank without FSDP."""
        return parallelize.build_mesh(self.layout, self.device.type) if self._mesh_needed() else None

    def _model(self, spec, mesh):
        """This rank's parts of the model (parallelize.py), its stages and parameter counts."""
        cfg, layout = spec.model, self.layout
        self.tied = self.family.tied(cfg)
        experts = spec_of(cfg["name"]).experts   # a mixture of experts (its spec)
        if experts and cfg.get("dispatch", "standard") != "standard":
            raise capability.Unsupported(
                f"model.dispatch={cfg['dispatch']} (DeepEP's kernels) is torchtitan's, on GPUs; the "
                "suite's own MoE layer dispatches tokens by all-to-all only (model.dispatch=standard)"
                + (f"; here: {self.implementation_reason}" if self.implementation_reason else ""))
        sparse = expert_parallel.meshes(mesh, layout, self.device.type) if experts else None
        self.ids, self.modules = parallelize.build(self.family, cfg, layout, mesh, self.device, spec.seed,
                                                   self.coords["pp"], compile=spec.compile,
                                                   sparse=sparse, rank=self.dist.rank)
        self.balancer = moe.Balancer(self.modules, sparse["tokens"], layout, bool(cfg.get("recompute")),
                                     spec.warmup_steps) if experts else None
        self.compiled = spec.compile
        self.first, self.last = self.coords["pp"] == 0, self.coords["pp"] == layout.pp - 1
        self.params = list({id(p): p for m in self.modules for p in m.parameters()}.values())
        self.counts = {**parallelize.parameter_counts(self.modules, layout, self.tied),
                       "model": self.family.parameter_count(cfg)}
        self.hidden = cfg.hidden

    def _batch(self, spec):
        """This rank's rows of the global batch (contract/parallel.py: replica_rows), its part
        of each sequence with context parallelism, and the samples it counts."""
        layout = self.layout
        tokens = self.family.synthetic_tokens(spec.model, layout.global_batch_size, spec.seed)
        rows = tokens[parallel.replica_rows(layout, self.coords)].to(self.device)
        self.inputs, self.labels = rows[:, :-1].contiguous(), rows[:, 1:].contiguous()
        if layout.cp > 1:  # this rank's part of every sequence
            self.inputs, self.labels = (context_parallel.split(t, layout, self.coords["cp"])
                                        for t in (self.inputs, self.labels))
        self.samples_per_step = parallel.counted_samples(layout, self.coords)

    def _optimizer(self, spec, mesh):
        """The optimizer, and the groups of the loss, the pipeline and the tied weights."""
        layout = self.layout
        self.optimizer = models.build_optimizer(spec.model, self.params)
        self.recipe = modes.recipe_environment(spec.model)
        self.dp_group = mesh["dp_cp"].get_group() if mesh is not None and layout.dp * layout.cp > 1 else None
        self.pp_group = mesh["pp"].get_group() if mesh is not None and layout.pp > 1 else None
        self.tie_group = parallelize.tie_groups(mesh, layout, self.tied) if mesh is not None else None
        self.schedule = parallelize.schedule(layout, self.modules, self.ids, self.device,
                                             self.pp_group, self.family.loss_fn) if layout.pp > 1 else None

    # ---- one iteration ------------------------------------------------------------------
    def _context(self):
        ctx = contextlib.ExitStack()
        ctx.enter_context(torch.autocast(self.device.type, dtype=self.amp_dtype, enabled=self.amp))
        if self.layout.tp > 1:  # the cross-entropy over vocabulary-sharded logits, and its backward
            ctx.enter_context(loss_parallel())
        return ctx

    def _accumulate(self):
        """No pipeline: the micro-batches one after another, gradients synchronised on the last."""
        model, m, n = self.modules[0], self.layout.accumulation, self.layout.micro_batch_size
        total = 0.0
        for i in range(m):
            sync = i == m - 1
            if hasattr(model, "set_requires_gradient_sync"):       # FSDP2, replicate
                model.set_requires_gradient_sync(sync)
                quiet = contextlib.nullcontext()
            else:
                quiet = model.no_sync() if not sync and hasattr(model, "no_sync") else contextlib.nullcontext()
            with quiet:
                loss = self.family.loss_fn(model(self.inputs[i * n:(i + 1) * n]),
                                           self.labels[i * n:(i + 1) * n]) / m
                self.scaler.scale(loss).backward()
            total = total + parallelize.local(loss.detach())
        return total

    def _pipeline(self):
        losses = [] if self.last else None
        if self.first:
            self.schedule.step(self.inputs)
        elif self.last:
            self.schedule.step(target=self.labels, losses=losses)
        else:
            self.schedule.step()
        if not self.last:
            return torch.zeros((), device=self.device)
        return torch.stack([parallelize.local(x).detach().float() for x in losses]).mean()

    def _global_loss(self, loss):
        """The iteration's loss over the global batch, on every rank (as Megatron logs it)."""
        loss = loss.detach().float().reshape(())
        if self.dp_group is not None:
            torch_dist.all_reduce(loss, group=self.dp_group)  # SUM: gloo has no AVG
            loss = loss / (self.layout.dp * self.layout.cp)
        if self.pp_group is not None:
            torch_dist.broadcast(loss, group=self.pp_group, group_src=self.layout.pp - 1)
        return loss

    def step(self):
        self.optimizer.zero_grad(set_to_none=True)
        with self._context():
            loss = self._pipeline() if self.schedule is not None else self._accumulate()
        if self.tie_group is not None:
            parallelize.tie_stages(self.modules, self.tie_group, self.tied)
        if self.balancer is not None:   # torchtitan's optimizer pre-hook
            self.balancer.step()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return self._global_loss(loss)

    # ---- what the record says ---------------------------------------------------------------
    def parallel_record(self) -> dict:
        out = {"layout": self.layout.as_dict(), "coords": self.coords, "stages": self.ids,
               "mesh_dims": list(parallelize.MESH_DIMS), "parameters": self.counts,
               "implementation": self.family.IMPLEMENTATION}
        if self.implementation_reason:
            out["implementation_reason"] = self.implementation_reason
        if self.layout.ep > 1:
            out["expert_coords"] = parallel.expert_coords(self.dist.rank, self.layout)
        return out

    def step_syncs(self):
        """TorchSession's probe, its two steps left out of the experts' per-step figures (the
        balancer counts every step after the warm-up as timed)."""
        if self.balancer is None:
            return super().step_syncs()
        kept, tokens = len(self.balancer.steps), self.balancer.tokens
        try:
            return super().step_syncs()
        finally:
            del self.balancer.steps[kept:]
            self.balancer.tokens = tokens

    def after_window(self, record) -> None:
        """Figures measured after the timed window: a mixture of experts' load and all-to-all
        seconds per step (before the untimed iterations below add steps of their own), a CPU
        rank's peak of live tensor bytes and a pipeline's bubble."""
        if self.balancer is not None:
            self.balancer.record(record)
        self._tensor_peak(record)
        self._bubble(record)

    def _tensor_peak(self, record) -> None:
        """On a CPU, `memory.peak_tensor_bytes`: the peak of live tensor bytes over one more
        iteration, untimed, counted operator by operator (frameworks/pytorch/layouts/tensor_memory.py),
        what max_memory_allocated gives on a GPU, where the record has that as
        peak_device_bytes. Not with compile=true: a compiled graph's buffers bypass the count."""
        if self.cuda or self.compiled:
            return
        record["memory"]["peak_tensor_bytes"] = tensor_memory.peak_of(self.step, self.device.type)

    def _bubble(self, record) -> None:
        """With a pipeline: the bubble measured beside the ideal one. A rank's busy time is
        its stages' forward and backward of `accumulation` micro-batches run alone, after
        the window (no sends, no waits); the measured bubble is 1 - busy / the median
        iteration of its timed window (so it also holds the sends' time)."""
        if self.schedule is None:
            return
        steps = [s["end"] - s["start"] for s in record["steps"] if s["phase"] == "measure"]
        busy = self._busy_seconds()
        iteration = statistics.median(steps)
        record["pipeline"] = {"schedule": self.layout.schedule, "stages": self.layout.stages,
                              "microbatches": self.layout.accumulation,
                              "ideal_bubble": parallel.ideal_bubble(self.layout),
                              "busy_s": busy, "iteration_s": iteration,
                              "measured_bubble": max(0.0, 1.0 - busy / iteration)}

    def _busy_seconds(self) -> float:
        n, m = self.layout.micro_batch_size, self.layout.accumulation
        self.sync()
        self.barrier()
        t0 = time.perf_counter()
        with self._context():
            for _ in range(m):
                for module in self.modules:
                    inner = parallelize.unwrap(module)
                    x = self.inputs[:n] if inner.embed is not None else self._hidden(n)
                    out = module(x)
                    if inner.head is not None:
                        self.family.loss_fn(out, self.labels[:n]).backward()
                    else:
                        out.backward(torch.ones_like(out))
        self.sync()
        busy = time.perf_counter() - t0
        self.optimizer.zero_grad(set_to_none=True)
        return busy

    def _hidden(self, n):
        """A micro-batch of hidden states, as a stage after the first receives them."""
        seq = self.inputs.shape[1] // (self.layout.tp if self.layout.sequence_parallel else 1)
        return torch.randn(n, seq, self.hidden, device=self.device, requires_grad=True)

    def parameter_checksum(self) -> float:
        """Sum of |p| over this rank's parts of the parameters: equal on the ranks of one
        (pp, tp) place without FSDP (the data-parallel replicas)."""
        return parallelize.checksum(self.params)


def session_of(family) -> type:
    """The session class of a model family module (its module's `session` asks for it)."""
    return type(f"{family.__name__.rsplit('.', 1)[-1].capitalize()}Session", (LMSession,), {"family": family})
