"""DLPerf's special cases in PyTorch (docs/special.md): Wide & Deep (CTR, its tables split
by rows over the ranks: sharded_embedding.py) and InsightFace-style face classification whose
very large softmax is sharded across ranks (partial FC, model parallel). The GPT has its own
modules: gpt.py, parallelize.py and lm_session.py.

Their specs (contract/models/wide_deep.py, insightface.py) name the sessions here. They are
session.TorchSession with other models, batches and optimizers (its three hooks); device,
DDP, compile, AMP, step, timer and memory figures are TorchSession's own.
Standard library + torch only: this runs in the framework's Python.
"""
import torch
import torch.distributed as torch_dist
import torch.distributed.nn.functional as dist_nn
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from frameworks.pytorch import models
from frameworks.pytorch.sharded_embedding import RowShardedEmbedding, ScaleGrad, shard_rows
from frameworks.pytorch.session import TorchSession


# --- Wide & Deep ----------------------------------------------------------------

class WideDeep(nn.Module):
    """Wide: one learned weight per hashed sparse feature (its own table), summed.
    Deep: the sparse features' embeddings and the dense features through an MLP.

    Both tables are RowShardedEmbedding: rows split over `world` ranks (this is `rank`),
    or whole where world is 1. Each table's rows come from a seed it draws from the global
    generator, so every rank, sharded or not, starts from the same full tables."""

    def __init__(self, deep_vocab_size, wide_vocab_size, deep_embedding_size, hidden_units,
                 hidden_layers, dense_fields, sparse_fields, dropout, rank=0, world=1, **_):
        super().__init__()
        wide_seed, deep_seed = torch.randint(2**62, (2,), device="cpu").tolist()
        self.wide = RowShardedEmbedding(wide_vocab_size, 1, rank, world, wide_seed)
        self.wide_bias = nn.Parameter(torch.zeros(1))
        self.deep = RowShardedEmbedding(deep_vocab_size, deep_embedding_size, rank, world, deep_seed)
        layers, cin = [], dense_fields + sparse_fields * deep_embedding_size
        for _ in range(hidden_layers):
            layers += [nn.Linear(cin, hidden_units), nn.ReLU(inplace=True), nn.Dropout(dropout)]
            cin = hidden_units
        layers.append(nn.Linear(cin, 1))
        self.mlp = nn.Sequential(*layers)

    def forward(self, dense, sparse_deep, sparse_wide):
        wide = self.wide(sparse_wide).sum(dim=(1, 2)) + self.wide_bias
        deep = self.mlp(torch.cat([dense, self.deep(sparse_deep).flatten(1)], dim=1)).squeeze(1)
        return wide + deep


def wide_deep_loss(logits, clicks):
    return F.binary_cross_entropy_with_logits(logits.float(), clicks)


# --- InsightFace: partial FC ------------------------------------------------------

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
        self.trunk = models.ResNet(layers=layers, width=width, num_classes=embedding_size)

    def forward(self, images):
        return self.trunk(images)


# --- synthetic data and optimizers ---------------------------------------------------

def clicks_batch(cfg, batch_size, gen):
    """Wide & Deep's: dense features, deep and wide ids of each sparse field, a click each."""
    dense = torch.rand(batch_size, cfg["dense_fields"], generator=gen)
    deep = torch.randint(0, cfg["deep_vocab_size"], (batch_size, cfg["sparse_fields"]), generator=gen)
    wide = torch.randint(0, cfg["wide_vocab_size"], (batch_size, cfg["sparse_fields"]), generator=gen)
    clicks = torch.randint(0, 2, (batch_size,), generator=gen).float()
    return (dense, deep, wide), (clicks,)


def faces_batch(cfg, batch_size, gen):
    """InsightFace's: images and their class ids."""
    n = cfg["image_size"]
    images = torch.randn(batch_size, 3, n, n, generator=gen)
    return (images,), (torch.randint(0, cfg["num_classes"], (batch_size,), generator=gen),)


def build_optimizer(cfg, params):
    opt = dict(cfg["optimizer"])
    name = opt.pop("name")
    if name == "adam":
        return torch.optim.Adam(params, **opt)
    if name == "sgd":
        return torch.optim.SGD(params, lr=opt["lr"], momentum=opt.get("momentum", 0.0),
                               weight_decay=opt.get("weight_decay", 0.0))
    return models.build_optimizer(cfg, params)


# --- sessions ------------------------------------------------------------------------

class SpecialSession(TorchSession):
    """TorchSession with a special model: made on the device itself (a table of 10^8 rows
    never visits the host), its own synthetic batch (`host_batch`: fixed random inputs made once,
    as DLPerf's synthetic-data runs) and optimizer."""

    host_batch = None   # (cfg, batch_size, generator) -> (inputs, labels) on the host

    def synthetic_batch(self, cfg, batch_size, seed):
        inputs, labels = type(self).host_batch(cfg, batch_size, torch.Generator().manual_seed(seed))
        return tuple(t.to(self.device) for t in inputs), tuple(t.to(self.device) for t in labels)

    def build_optimizer(self, cfg, params):
        return build_optimizer(cfg, params)


class WideDeepSession(SpecialSession):
    """Wide & Deep with its tables split by rows over the ranks (`model.embedding=sharded`,
    the default) or whole on every rank (`replicated`: plain DDP, the tables' gradients
    all-reduced). Sharded, the MLP and the wide bias stay data parallel (DDP) and each rank
    updates only its own rows; on one rank both are the same model."""

    EMBEDDINGS = ("sharded", "replicated")
    host_batch = clicks_batch

    def build_model(self, cfg):
        self.embedding = cfg.get("embedding", "replicated")  # specs from before the switch
        if self.embedding not in self.EMBEDDINGS:
            raise ValueError(f"model.embedding must be one of {', '.join(self.EMBEDDINGS)}, "
                             f"got {self.embedding!r}")
        split = self.embedding == "sharded" and self.dist.world_size > 1
        with self.device:
            model = WideDeep(**cfg, rank=self.dist.rank if split else 0,
                             world=self.dist.world_size if split else 1)
        self.tables = {"deep": model.deep, "wide": model.wide}
        self.own = {id(t.weight) for t in self.tables.values()} if split else set()
        if split:  # a shard is this rank's own: DDP leaves it alone (as TorchRec's DMP does)
            DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(
                model, [f"{name}.weight" for name in self.tables])
        return model, wide_deep_loss, list(model.parameters())

    def environment(self):
        """The record says which embedding ran and the rows this rank held."""
        return {**super().environment(), "embedding": self.embedding,
                "embedding_rows": {name: {"first": t.first, "rows": t.weight.shape[0], "of": t.num_rows}
                                   for name, t in self.tables.items()}}

    def parameter_checksum(self) -> float:
        """TorchSession's sum of |p| over the data-parallel parameters only: equal on every
        rank (a table's shard differs by rank, so it is left out)."""
        total = 0.0
        with torch.no_grad():
            for p in self.model.parameters():
                if id(p) not in self.own:
                    for chunk in p.detach().reshape(-1).split(1 << 24):
                        total += chunk.abs().sum(dtype=torch.float64).item()
        return total


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
