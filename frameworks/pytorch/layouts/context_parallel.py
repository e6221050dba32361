"""Context parallelism for the CPU layouts: each sequence split over the `cp` ranks of the grid,
attention by all-gathered keys and values.

torch.distributed.tensor.experimental.context_parallel (the ring attention torchtitan applies
on GPUs) has no sharding rule for the CPU's attention kernel in torch 2.13
("aten._scaled_dot_product_flash_attention_for_cpu.default does not have a sharding strategy
registered"), so the CPU splits the sequence the way Llama 3 itself was trained ("The Llama 3
Herd of Models", section 3.3.2, all-gather based context parallelism): a rank keeps the
queries of its part of the sequence and attends to every key and value, gathered from the cp
ranks by DTensor (Shard(seq) -> Replicate; the gathered tensor's gradient is Partial, so its
backward is a reduce-scatter). No collective here is written by hand.

A sequence is cut into 2 x cp equal chunks and rank cp_i holds chunks cp_i and 2 cp - 1 - cp_i
(contract/parallel.py's cp_chunks), so each rank does as much causal attention
(torchtitan's and Megatron-LM's load balancing); its causal mask comes from the positions, not
from the order of the gathered keys. The ranks of a cp group train on the same samples, so
gradients are averaged over dp x cp (frameworks/pytorch/layouts/parallelize.py).
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard

from contract import parallel


def positions(seq_len: int, layout, cp_i: int) -> torch.Tensor:
    """Positions (of 0 .. seq_len - 1) of the tokens cp rank cp_i holds: its two chunks."""
    size = seq_len // (2 * layout.cp)
    return torch.cat([torch.arange(c * size, (c + 1) * size) for c in parallel.cp_chunks(layout, cp_i)])


def split(tokens: torch.Tensor, layout, cp_i: int) -> torch.Tensor:
    """A rank's part of (rows, seq) tokens: the columns at its positions."""
    return tokens[:, positions(tokens.shape[1], layout, cp_i)].contiguous()


def gather(t: torch.Tensor, mesh) -> torch.Tensor:
    """(b, heads, s / cp, d) -> (b, heads, s, d), the cp ranks' parts in rank order."""
    return DTensor.from_local(t, mesh, [Shard(2)]).redistribute(mesh, [Replicate()]) \
        .to_local(grad_placements=[Partial()])


class AllGatherAttention(nn.Module):
    """The attention core of one layer under context parallelism (module docstring)."""

    def __init__(self, mesh, key_positions: torch.Tensor, scale=None):
        super().__init__()
        self.mesh, self.key_positions, self.scale = mesh, key_positions, scale

    def forward(self, q, k, v, positions):
        mask = positions[:, None] >= self.key_positions.to(q.device)[None, :]
        k, v = gather(k, self.mesh), gather(v, self.mesh)
        if k.shape[1] != q.shape[1]:   # grouped-query attention: each key-value head's queries
            # (SDPA's enable_gqa runs in its flash kernel only, which takes no mask: with one,
            # a GPU would fall back to the math kernel and hold every layer's s x s weights)
            k, v = (t.repeat_interleave(q.shape[1] // t.shape[1], dim=1) for t in (k, v))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scale)


def apply(model: nn.Module, mesh, layout, seq_len: int, device) -> None:
    """Make a model (a stage) attend over the cp ranks of `mesh`: its positions and each
    layer's attention core (its softmax scale kept: DeepSeek-V3's is its own)."""
    cp_i = mesh.get_local_rank()
    model.positions = positions(seq_len, layout, cp_i).to(device)
    keys = torch.cat([positions(seq_len, layout, i) for i in range(layout.cp)])
    for layer in model.layers.values():  # type: ignore[operator]  # nn.Module's __getattr__ says Tensor | Module
        layer.attention.core = AllGatherAttention(mesh, keys, getattr(layer.attention.core, "scale", None))
