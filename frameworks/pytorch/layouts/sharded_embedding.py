"""An embedding table split by rows across ranks (model parallel), its lookups exchanged
with all-to-all: Wide & Deep's tables as DLPerf's OneFlow run split them (docs/special.md).

Rank r holds the rows [first_r, first_r + n_r) of the table (`shard_rows`, `owner`). A
lookup sends each id to the rank that owns it, that rank gathers the rows, and the
vectors come back the same way; the second exchange is autograd-aware
(all_to_all_single_autograd: torch's functional collectives, which it names as the
successor of the deprecated torch.distributed.nn.functional.all_to_all_single), so each
row's gradient reaches its owner and only the owner updates it. No collective is made for a table on one rank.

TorchRec (DistributedModelParallel, row-wise sharding) would do this, but it needs
fbgemm-gpu, whose CPU build on PyPI (fbgemm-gpu-cpu 1.9.0) does not load beside torch
2.13.0 (an undefined C++ symbol: built against another torch); hence this small module.
Standard library + torch only: this runs in the framework's Python.
"""
import torch
import torch.distributed as torch_dist
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F
from torch import nn

BLOCK_ROWS = 1 << 16  # rows drawn from one generator at init (see init_rows)


def shard_rows(num_rows: int, world: int, rank: int):
    """(first row, rows) of rank's shard: num_rows split as evenly as can be, the first
    num_rows % world ranks holding one row more."""
    base, extra = divmod(num_rows, world)
    return rank * base + min(rank, extra), base + (rank < extra)


def shard_starts(num_rows: int, world: int) -> list:
    """Each rank's first row, in rank order."""
    return [shard_rows(num_rows, world, r)[0] for r in range(world)]


def owner(ids: torch.Tensor, num_rows: int, world: int) -> torch.Tensor:
    """The rank that holds each id's row (ids in [0, num_rows))."""
    bounds = torch.tensor(shard_starts(num_rows, world)[1:], dtype=ids.dtype, device=ids.device)
    return torch.bucketize(ids, bounds, right=True)


def init_rows(weight: torch.Tensor, first: int, num_rows: int, seed: int, low: float, high: float,
              block_rows: int = BLOCK_ROWS) -> None:
    """Fill `weight` with rows [first, first + len(weight)) of a num_rows table drawn
    uniform in [low, high): the full table is cut into blocks of block_rows rows, block b
    drawn from its own generator seeded seed + b, so a shard holds exactly the full table's
    rows whatever the number of ranks (a sharded run starts where an unsharded one does)."""
    last = first + weight.shape[0]
    with torch.no_grad():
        for b in range(first // block_rows, (last + block_rows - 1) // block_rows):
            b0, b1 = b * block_rows, min((b + 1) * block_rows, num_rows)
            gen = torch.Generator(device=weight.device).manual_seed(seed + b)
            block = torch.empty(b1 - b0, weight.shape[1], device=weight.device, dtype=weight.dtype)
            block.uniform_(low, high, generator=gen)
            lo, hi = max(b0, first), min(b1, last)
            weight[lo - first:hi - first].copy_(block[lo - b0:hi - b0])


class ScaleGrad(torch.autograd.Function):
    """The identity forward; the gradient times `factor` backward."""

    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.factor, None


class RowShardedEmbedding(nn.Module):
    """This rank's rows of a `num_rows x dim` table; `forward(ids)` looks up any ids of the
    whole table. With world 1 it is a plain embedding of the whole table.

    Gradients: every rank's loss is the mean over its own batch and the data-parallel
    part's gradients are averaged (DDP), so the objective is the mean of the ranks' losses.
    A row's gradient arrives at its owner summed over the ranks that looked it up, hence
    scaled by 1 / world, as the average DDP would have taken of a replicated table."""

    def __init__(self, num_rows, dim, rank=0, world=1, seed=0, init_range=0.05, group=None):
        super().__init__()
        if num_rows < world:
            raise ValueError(f"a table of {num_rows} rows cannot be split over {world} ranks")
        self.num_rows, self.world, self.group = num_rows, world, group
        self.first, rows = shard_rows(num_rows, world, rank)
        self.weight = nn.Parameter(torch.empty(rows, dim))
        init_rows(self.weight, self.first, num_rows, seed, -init_range, init_range)
        # Not a buffer: the same on every rank, nothing for DDP to broadcast each step.
        self.bounds = torch.tensor(shard_starts(num_rows, world)[1:], device=self.weight.device)

    def forward(self, ids):
        if self.world == 1:
            return F.embedding(ids, self.weight)
        flat = ids.reshape(-1)
        dest = torch.bucketize(flat, self.bounds, right=True)  # owner(), its bounds made once
        order = torch.argsort(dest, stable=True)
        send_counts = torch.bincount(dest, minlength=self.world)
        recv_counts = torch.empty_like(send_counts)
        torch_dist.all_to_all_single(recv_counts, send_counts, group=self.group)
        # The split sizes must be on the host: one wait for the device per lookup.
        send, recv = send_counts.tolist(), recv_counts.tolist()
        asked = flat.new_empty(sum(recv))
        torch_dist.all_to_all_single(asked, flat[order], recv, send, group=self.group)
        found = F.embedding(asked - self.first, self.weight)
        back = funcol.all_to_all_single_autograd(found, send, recv, self.group or torch_dist.group.WORLD)
        back = ScaleGrad.apply(back, 1.0 / self.world)
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(len(order), device=order.device)
        return back[inverse].view(*ids.shape, -1)
