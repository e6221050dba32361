"""Expert parallelism for the CPU layouts: a mixture of experts' routed experts split over the
ep ranks of a pipeline stage, torchtitan's way (contract/parallel.py says how ep borrows the
stage's ranks; frameworks/pytorch/models/moe.py dispatches the tokens).

- Meshes (`meshes`): torchtitan's sparse mesh, a stage's dp x cp x tp ranks in grid order
  as (edp, ep), ep innermost: "ep" the expert groups (the all-to-alls), "edp" the ranks that
  hold the same experts; and the group whose tokens make a stage's load (`tokens`): dp x cp,
  and tp too where each tp rank routes its own part of the sequence (ep > 1).
- A rank of an expert group keeps E / ep of each MoE layer's experts (`apply`), made on the
  meta device like every parameter and filled with the single-device values of those
  experts (frameworks/pytorch/layouts/parallelize.py's init_parameters reads `Experts.ids`).
- With tensor parallelism and ep = 1 the experts' hidden width is split over tp (w1, w3 by
  rows of their outputs, w2 by columns: torchtitan's expert TP; each weight's dim is its
  experts class's `SPLIT`, a bias tp does not split replicated); with ep > 1 each tp rank
  routes its part of the sequence and the router's gate runs on it as a sequence-parallel
  module (its weight replicated, its gradient summed over tp), as torchtitan's.
- Gradients (`wrap_experts`): a routed expert's gradient arrives whole on its rank (the
  all-to-all's backward brings every token's part), summed over the edp ranks that hold the
  same expert and divided by dp x cp, the ranks of different samples: torchtitan's FSDP of
  the experts over efsdp with the dense mesh's gradient divide factor. FSDP2's `fully_shard`
  over edp with `fsdp`, its `replicate` otherwise, each before the dense parts' wrapper (so
  that the dense one leaves the experts alone), averaging over edp; the experts' gradients
  are scaled by edp / (dp x cp) on their way (`Experts.grad_scale`), since FSDP2's own
  divide factor reduces with PREMUL_SUM, which gloo lacks.
"""
from typing import Any

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import SequenceParallel, parallelize_module

from contract import parallel
from frameworks.pytorch.models import moe


def meshes(mesh, layout, device_type: str) -> dict:
    """{"ep", "edp": the sparse mesh's dims (None without expert parallelism); "tokens": the
    load's group, or None} (module docstring); every rank makes every group (new_group is
    collective). `mesh`: the dense grid's (parallelize.build_mesh), None for one rank."""
    out: dict[str, Any] = {"ep": None, "edp": None, "tokens": None}
    if mesh is None:
        return out
    if layout.ep > 1:
        ranks = torch.arange(layout.world).reshape(layout.pp, layout.edp, layout.ep)
        sparse = DeviceMesh(device_type, ranks, mesh_dim_names=("pp", "edp", "ep"))
        out.update(ep=sparse["ep"], edp=sparse["edp"])
    if layout.ep > 1 and layout.tp > 1:
        out["tokens"] = mesh["dp", "cp", "tp"]._flatten("dp_cp_tp").get_group()
    elif layout.dp * layout.cp > 1:
        out["tokens"] = mesh["dp_cp"].get_group()
    return out


def layers(module: nn.Module) -> list:
    return [m for m in module.modules() if isinstance(m, moe.MoE)]


def apply(model: nn.Module, mesh, sparse: dict, layout, rank: int) -> None:
    """Each MoE layer of `model` (a stage, on the meta device) set for the layout (module
    docstring): its expert group and local experts, its tensor-parallel placements."""
    tp_mesh = mesh["tp"] if layout.tp > 1 else None
    ep_i = parallel.expert_coords(rank, layout)["ep"]
    for layer in layers(model):
        layer.tp_mesh, layer.split = tp_mesh, layout.ep > 1 and tp_mesh is not None
        experts = layer.experts
        if layout.ep > 1:
            per = layer.count // layout.ep
            layer.ep, layer.ep_group = layout.ep, sparse["ep"].get_group()
            experts.ids = range(ep_i * per, (ep_i + 1) * per)
            for name in experts.SPLIT:
                full = getattr(experts, name)
                setattr(experts, name, nn.Parameter(torch.empty((per,) + tuple(full.shape[1:]), device="meta")))
            if layer.split:
                parallelize_module(layer.router.gate, tp_mesh, SequenceParallel(use_local_output=True))
        elif tp_mesh is not None:   # the hidden width (w1, w3 (E, F, D) by F; w2 (E, D, F) by F): SPLIT
            for name, dim in experts.SPLIT.items():
                placement = Replicate() if dim is None else Shard(dim)
                setattr(experts, name, nn.Parameter(distribute_tensor(getattr(experts, name), tp_mesh, [placement])))


def wrap_experts(model: nn.Module, sparse: dict, layout) -> None:
    """The routed experts' data parallelism (module docstring), before the dense wrapper's."""
    if layout.ep == 1:
        return                     # the experts are like every other weight
    for layer in layers(model):
        if layout.fsdp:
            fully_shard(layer.experts, mesh=sparse["edp"], reshard_after_forward=layout.pp == 1)
        elif layout.dp * layout.cp > 1 or layout.edp > 1:
            from torch.distributed._composable.replicate_with_fsdp import replicate
            replicate(layer.experts, mesh=sparse["edp"])
        layer.experts.grad_scale = layout.edp / (layout.dp * layout.cp)


def is_expert(name: str) -> bool:
    """Whether a parameter (by name) is a routed expert's."""
    return ".experts." in name or name.startswith("experts.")
