"""InsightFace-style face classification in PyTorch (docs/special.md): a ResNet backbone, data
parallel, and a very large softmax sharded across the ranks (partial FC, model parallel). Its
spec (contract/models/insightface.py) names `session` here: session.SpecialSession with this
model and batch; optimizer, device, DDP, compile, AMP, step, timer and memory figures are
TorchSession's own.
Standard library + torch only: this runs in the framework's Python.
"""
import torch
import torch.distributed as torch_dist
import torch.distributed.nn.functional as dist_nn
import torch.nn.functional as F
from torch import nn

from frameworks.pytorch.layouts.sharded_embedding import ScaleGrad, shard_rows
from frameworks.pytorch.models.resnet50 import ResNet
from frameworks.pytorch.session import SpecialSession


# --- partial FC -----------------------------------------------------------------------

class _ShardedSoftmaxCE(torch.autograd.Function):
    """Mean softmax cross-entropy over logits whose class columns are split across ranks.

    Forward: the row max and the sum of exponentials are all-reduced (MAX, SUM); the target's
    logit comes from the rank that holds it. Backward needs no collective: the gradient of
    the local columns is (softmax - one-hot) / rows. (InsightFace's DistCrossEntropy.)
    `target` is the local column of each row's class, -1 where another rank holds it; no
    boolean indexing, which would wait for the device inside the timed step."""

    @staticmethod
    def forward(ctx, logits, target, group):
        distributed = group is not None
        rows = torch.arange(logits.shape[0], device=logits.device)
        mine = (target >= 0).to(logits.dtype)
        top = logits.max(dim=1).values
        if distributed:
            torch_dist.all_reduce(top, torch_dist.ReduceOp.MAX, group=group)
        shifted = logits - top[:, None]
        picked = shifted[rows, target.clamp(min=0)] * mine
        prob = shifted.exp_()
        total = prob.sum(dim=1)
        if distributed:
            torch_dist.all_reduce(total, group=group)
            torch_dist.all_reduce(picked, group=group)
        prob.div_(total[:, None])
        ctx.save_for_backward(prob, target)
        return (total.log() - picked).mean()

    @staticmethod
    def backward(ctx, grad):
        prob, target = ctx.saved_tensors
        rows = torch.arange(prob.shape[0], device=prob.device)
        prob.index_put_((rows, target.clamp(min=0)), -(target >= 0).to(prob.dtype), accumulate=True)
        return prob.mul_(grad / prob.shape[0]), None, None


class PartialFC(nn.Module):
    """The classifier rows [first, first + rows) of num_classes, CosFace logits and the
    sharded softmax cross-entropy over the embeddings of every rank's batch.

    On one rank (no process group) it is a plain FC with the same loss. With `data_parallel`,
    the gradient reaching each rank's backbone is scaled by the number of ranks: each rank's
    embedding gradient already is its share of the global loss's gradient, so the backbone
    gradients must be summed over ranks, and DDP averages them."""

    def __init__(self, embedding_size, num_classes, rank=0, world=1, scale=64.0, margin=0.4,
                 data_parallel=True):
        super().__init__()
        self.first, rows = shard_rows(num_classes, world, rank)
        self.world, self.scale, self.margin, self.data_parallel = world, scale, margin, data_parallel
        self.weight = nn.Parameter(torch.empty(rows, embedding_size).normal_(0.0, 0.01))

    def forward(self, embeddings, labels):
        group = torch_dist.group.WORLD if self.world > 1 else None
        if group is not None:
            if self.data_parallel:
                embeddings = ScaleGrad.apply(embeddings, float(self.world))
            embeddings = torch.cat(dist_nn.all_gather(embeddings), dim=0)  # autograd: grads come back
            gathered = [torch.empty_like(labels) for _ in range(self.world)]
            torch_dist.all_gather(gathered, labels)
            labels = torch.cat(gathered)
        cosine = F.linear(F.normalize(embeddings), F.normalize(self.weight)).float()
        local = labels - self.first
        target = torch.where((local >= 0) & (local < self.weight.shape[0]), local,
                             torch.full_like(local, -1))
        if self.margin:  # CosFace: the target's cosine less the margin, on the rank that holds it
            rows = torch.arange(cosine.shape[0], device=cosine.device)
            cosine = cosine.index_put((rows, target.clamp(min=0)),
                                      -self.margin * (target >= 0).to(cosine.dtype), accumulate=True)
        return _ShardedSoftmaxCE.apply(cosine * self.scale, target, group)


class FaceModel(nn.Module):
    """The backbone: a ResNet trunk whose last layer gives the embedding."""

    def __init__(self, layers, width, embedding_size, **_):
        super().__init__()
        self.trunk = ResNet(layers=layers, width=width, num_classes=embedding_size)

    def forward(self, images):
        return self.trunk(images)


# --- its batch and session ------------------------------------------------------------

def faces_batch(cfg, batch_size, gen):
    """InsightFace's: images and their class ids."""
    n = cfg["image_size"]
    images = torch.randn(batch_size, 3, n, n, generator=gen)
    return (images,), (torch.randint(0, cfg["num_classes"], (batch_size,), generator=gen),)


class FaceSession(SpecialSession):
    """The backbone is data parallel (DDP); the classifier shard is this rank's alone."""

    host_batch = faces_batch

    def build_model(self, cfg):
        with self.device:
            backbone = FaceModel(**cfg)
            head = PartialFC(cfg["embedding_size"], cfg["num_classes"], self.dist.rank,
                             self.dist.world_size, cfg["scale"], cfg["margin"])
        self.head = head
        return backbone, head, list(backbone.parameters()) + list(head.parameters())


session = FaceSession
