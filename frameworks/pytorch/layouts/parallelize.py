"""A decoder language model split over a point's grid with PyTorch's own distributed
libraries, in torchtitan's order: the device mesh, then each rank's pipeline stage(s), tensor
parallelism, activation checkpointing (the model's `recompute`), data parallelism (FSDP2 or
DDP), then the parameters made and filled. No hand-written collective splits the model; the
one collective of ours is Megatron's: where the output layer is the token embedding (GPT), the
first and last pipeline stages sum that weight's gradient (`tie_stages`).

The model comes as a family module (frameworks/pytorch/models/gpt.py, frameworks/pytorch/models/llama3.py):
its `Model` with `embed`, `layers` (a ModuleDict) and `head`, `keep` and `tie`; `tied(cfg)`,
`full_value`, and its tensor-parallel plan `tp_plan(model, sequence_parallel)`, which names its
parts and how each splits (the family's last stage reuses `head_plan` here).

- DeviceMesh holds the grid (pp, dp, cp, tp), tensor parallel innermost
  (contract/parallel.py says why and checks the sizes).
- Context parallelism (Llama 3): each layer attends over the cp ranks' parts of the sequence
  (frameworks/pytorch/layouts/context_parallel.py); the cp ranks train on the same samples, so the
  gradients are averaged over dp x cp, one flattened mesh dimension ("dp_cp"), as torchtitan
  shards FSDP over dp_shard x cp.
- Tensor parallelism (DTensor, Megatron's splits): QKV and the MLP's first layer by columns,
  the attention's output and the MLP's second layer by rows, the token embedding by
  vocabulary rows and the output layer by vocabulary columns (the same rows: they stay tied),
  and the cross-entropy over the vocabulary-sharded logits (`loss_parallel`). With
  `sequence_parallel`, LayerNorms and dropout run on a rank's part of the sequence. Llama 3's
  plan is torchtitan's parallelize_llama's: wq, wk, wv and w1, w3 by columns, wo and w2 by
  rows, RMSNorms sequence-parallel as an option.
- Pipeline (`torch.distributed.pipelining`): `pp x virtual_stages` stages of equal layers; a
  rank holds stage `pp_rank + k pp` (k < virtual_stages); GPipe, 1F1B or interleaved 1F1B.
- Data parallelism over `dp` (x `cp`): `fully_shard` (FSDP2) on every block and the stage when
  `fsdp`; else DistributedDataParallel for plain data parallelism (tp = pp = 1), and FSDP2's
  `replicate` (all-reduced gradients, DDP's meaning) beside tensor parallelism (DDP takes no
  DTensor parameter) or a pipeline (DDP's bucket rebuild fails inside a pipeline stage in
  torch 2.13: "rebuilt parameter indices size is not same as original model parameters").
- Parameters are made on the meta device and filled last (frameworks/pytorch/models/gpt.py), so no
  rank ever holds more than its share plus one parameter's full value.
"""
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe,
                                          ScheduleInterleaved1F1B)
from torch.distributed.tensor import DTensor, Replicate, Shard
from torch.distributed.tensor._utils import compute_local_shape_and_global_offset
from torch.distributed.tensor.parallel import ColwiseParallel, ParallelStyle, SequenceParallel, parallelize_module

from contract import models
from frameworks.pytorch.layouts import context_parallel, expert_parallel

MESH_DIMS = ("pp", "dp", "cp", "tp")
SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B, "interleaved_1f1b": ScheduleInterleaved1F1B}


def build_mesh(layout, device_type: str):
    mesh = init_device_mesh(device_type, (layout.pp, layout.dp, layout.cp, layout.tp),
                            mesh_dim_names=MESH_DIMS)
    mesh["dp", "cp"]._flatten("dp_cp")  # the gradients' group: the cp ranks share samples
    return mesh


def local(t):
    """A DTensor's part on this rank; a plain tensor as it is."""
    return t.to_local() if isinstance(t, DTensor) else t


def checksum(params) -> float:
    """The sum of |values| of this rank's parts of `params` (the harness's parameter check)."""
    with torch.no_grad():
        return sum(local(p).detach().abs().sum(dtype=torch.float64).item() for p in params)


def stage_ids(layout, pp_rank: int) -> list:
    """The stages a pipeline rank holds: one, or `virtual_stages` looped (interleaved)."""
    return [pp_rank + k * layout.pp for k in range(layout.virtual_stages)]


def stage_layers(layers: int, stages: int, stage: int) -> range:
    per = layers // stages
    return range(stage * per, (stage + 1) * per)


def head_plan(model, norm: str, sequence_parallel: bool) -> dict:
    """The last stage's final norm (sequence-parallel as an option) and the output layer by
    vocabulary columns, its logits left sharded for loss_parallel."""
    if model.head is None:
        return {}
    seq = Shard(1) if sequence_parallel else Replicate()
    plan: dict[str, ParallelStyle] = {norm: SequenceParallel()} if sequence_parallel else {}
    plan["head.output"] = ColwiseParallel(input_layouts=seq, output_layouts=Shard(-1),
                                          use_local_output=False)
    return plan


def tensor_parallel(model, family, tp_mesh, sequence_parallel: bool) -> None:
    """The family's tensor-parallel plan (its module's `tp_plan`) applied over tp."""
    parallelize_module(model, tp_mesh, family.tp_plan(model, sequence_parallel))
    model.tie()  # a tied embedding and output are both Shard(0) over vocabulary rows: one again
    if hasattr(model, "tensor_parallel"):   # what a family splits beyond the plan's modules
        model.tensor_parallel(tp_mesh)


def fsdp(model, dp_mesh, reshard_after_forward: bool) -> None:
    for layer in model.layers.values():
        fully_shard(layer, mesh=dp_mesh, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=dp_mesh, reshard_after_forward=reshard_after_forward)


def replicate(model: nn.Module, dp_mesh) -> None:
    from torch.distributed._composable.replicate_with_fsdp import replicate as fsdp_replicate
    fsdp_replicate(model, mesh=dp_mesh)


def local_part(param, full: torch.Tensor) -> torch.Tensor:
    """This rank's part of a parameter's full value: the block DTensor's placements give it."""
    if not isinstance(param, DTensor):
        return full
    shape, offset = compute_local_shape_and_global_offset(full.shape, param.device_mesh, param.placements)
    return full[tuple(slice(o, o + n) for o, n in zip(offset, shape))]


def replicas(param, layout, expert: bool = False) -> int:
    """How many ranks hold the same values as this rank's part of `param`, over dp, cp and tp
    (a pipeline stage's parameters are its own): a grid dim the parameter's DTensor does not
    shard (FSDP shards over the flattened "dp_cp") multiplies them. A routed expert's weight
    under expert parallelism (`expert`) is held by the edp ranks of its expert, unless FSDP
    shards it over them."""
    sharded = set()
    if isinstance(param, DTensor):
        for name, placement in zip(param.device_mesh.mesh_dim_names or (), param.placements):
            if not isinstance(placement, Replicate):
                sharded.update(name.split("_"))
    if expert:
        return 1 if "edp" in sharded else layout.edp
    return (layout.dp if "dp" not in sharded else 1) * (layout.cp if "cp" not in sharded else 1) \
        * (layout.tp if "tp" not in sharded else 1)


def unwrap(module: nn.Module) -> nn.Module:
    return module.module if isinstance(module, nn.parallel.DistributedDataParallel) else module


def _param(module, name: str):
    try:
        return module.get_parameter(name)
    except AttributeError:  # a part this stage does not hold
        return None


def tied_copy(module, tied: dict):
    """The parameter a stage holds as a copy of a tied one held by another stage, or None."""
    for name, source in tied.items():
        if _param(module, source) is None and _param(module, name) is not None:
            return _param(module, name)
    return None


def parameter_counts(modules, layout, tied: dict) -> dict:
    """{held, owned} of a rank's stage modules: held, the elements of the parameters it keeps;
    owned, its share of the model, each part divided by its replicas and a stage's copy of a
    tied parameter left to the stage that holds it, so that the ranks' owned counts add up to
    the model's count."""
    held, owned, seen = 0, 0.0, set()
    for module in map(unwrap, modules):
        copy = tied_copy(module, tied)
        for name, p in module.named_parameters():
            if id(p) in seen:
                continue
            seen.add(id(p))
            n = local(p).numel()
            held += n
            if p is not copy:
                owned += n / replicas(p, layout, layout.ep > 1 and expert_parallel.is_expert(name))
    return {"held": held, "owned": owned}


def tie_groups(mesh, layout, tied: dict):
    """Per rank, the group of the first and last pipeline ranks with its (dp, tp): they hold
    the token embedding and the output layer's copy of it. Every rank makes every group
    (new_group is collective); None where there is no pipeline or nothing is tied."""
    if layout.pp == 1 or not tied:
        return None
    ranks = mesh.mesh  # (pp, dp, cp, tp) -> global rank
    mine = None
    for d in range(layout.dp):
        for c in range(layout.cp):
            for t in range(layout.tp):
                pair = [int(ranks[0, d, c, t]), int(ranks[-1, d, c, t])]
                group = dist.new_group(pair)
                if dist.get_rank() in pair:
                    mine = group
    return mine


def tie_stages(modules, group, tied: dict) -> None:
    """Megatron's embedding all-reduce: the gradient of a tied weight, summed between the
    first and the last stage, so both copies take the same update."""
    for module in map(unwrap, modules):
        for name in (n for pair in tied.items() for n in pair):
            p = _param(module, name)
            if p is None or p.grad is None:
                continue
            if isinstance(p.grad, DTensor) and p.grad.placements != p.placements:
                # the embedding's own backward leaves its gradient Replicate: cut this
                # rank's rows out (no communication), as the output layer's are
                p.grad = p.grad.redistribute(p.device_mesh, p.placements)
            grad = local(p.grad)
            dist.all_reduce(grad, group=group)


@torch.no_grad()
def init_parameters(model: nn.Module, family, seed: int, tied: dict | None = None) -> None:
    """Fill every parameter with its single-device value (the family's `full_value`), this
    rank's part of it where the parameter is sharded; a tied pair both by the output layer's
    name (`tied`: {output: embedding}); a routed expert's weights, of the experts its module
    holds (`ids`: expert parallelism), and the model's `init_settings` where it has some.
    Buffers a module resets (`reset_buffers`) are reset: to_empty left them unset."""
    by_output = {source: name for name, source in (tied or {}).items()}
    settings = getattr(model, "init_settings", {})   # what a family's values depend on beyond the name
    for name, p in model.named_parameters():
        owner = model.get_submodule(name.rpartition(".")[0])
        rows = {"rows": owner.ids} if hasattr(owner, "ids") else {}
        part = local_part(p, family.full_value(by_output.get(name, name), tuple(p.shape), seed, **rows,
                                               **settings))
        target = local(p)
        target.copy_(part.to(target.dtype))
    for module in model.modules():
        if hasattr(module, "reset_buffers"):
            module.reset_buffers()  # type: ignore[operator]  # nn.Module's __getattr__ says Tensor | Module


def build(family, cfg: dict, layout, mesh, device, seed: int, pp_rank: int, compile=False,
          sparse=None, rank: int = 0):
    """This rank's stage modules, made, split and filled (module docstring); `compile`:
    each block through torch.compile (after tensor parallelism, before FSDP, as torchtitan);
    `sparse`: a mixture of experts' meshes (expert_parallel.meshes), `rank` this rank's."""
    stages = layout.stages
    ids = stage_ids(layout, pp_rank) if layout.pp > 1 else [0]
    modules = []
    grads = layout.dp * layout.cp    # the ranks that average the gradients
    experts = models.get(cfg["name"]).experts   # a mixture of experts (its spec)
    for s in ids:
        with torch.device("meta"):
            m = family.Model(**cfg)
        if layout.pp > 1:
            m.keep(stage_layers(cfg["layers"], stages, s), first=s == 0, last=s == stages - 1)
        if layout.cp > 1:
            context_parallel.apply(m, mesh["cp"], layout, cfg["seq_len"], device)
        if layout.tp > 1:
            tensor_parallel(m, family, mesh["tp"], layout.sequence_parallel)
        if experts and mesh is not None:
            expert_parallel.apply(m, mesh, sparse, layout, rank)
        if compile:
            for layer in m.layers.values():
                layer.compile()
        # DDP all-reduces every gradient over dp: not a routed expert's under expert parallelism
        ddp = grads > 1 and not layout.fsdp and layout.tp == layout.pp == 1 and layout.ep == 1
        sharded = layout.fsdp or (grads > 1 and not ddp)
        if experts:
            expert_parallel.wrap_experts(m, sparse, layout)
        if layout.fsdp:  # a pipeline reuses the gathered parameters of a micro-batch's forward
            fsdp(m, mesh["dp_cp"], reshard_after_forward=layout.pp == 1)
        elif sharded:
            replicate(m, mesh["dp_cp"])
        m.to_empty(device=device)
        if not sharded:
            m.tie()   # to_empty made the embedding and the output two tensors again; FSDP2
                      # sets a shared parameter on every module that shares it itself
        init_parameters(m, family, seed, family.tied(cfg))
        if ddp:
            m = nn.parallel.DistributedDataParallel(
                m, process_group=mesh["dp_cp"].get_group(),
                device_ids=[device.index] if device.type == "cuda" else None)
        modules.append(m)
    return ids, modules


def schedule(layout, stage_modules, ids, device, pp_group, loss):
    """The pipeline schedule of a rank's stages (torch.distributed.pipelining)."""
    stages = [PipelineStage(m, s, layout.stages, device, group=pp_group)
              for s, m in zip(ids, stage_modules)]
    cls = SCHEDULES[layout.schedule]
    multi = layout.schedule == "interleaved_1f1b"
    return cls(stages if multi else stages[0], n_microbatches=layout.accumulation, loss_fn=loss)
