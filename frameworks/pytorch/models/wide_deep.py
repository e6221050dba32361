"""Wide & Deep, DLPerf's CTR case, in PyTorch (docs/special.md): its tables split by rows over
the ranks (frameworks/pytorch/layouts/sharded_embedding.py) or whole on every rank, the MLP data
parallel. Its spec (contract/models/wide_deep.py) names `session` here: session.SpecialSession
with this model and batch; optimizer, device, DDP, compile, AMP, step, timer and memory figures
are TorchSession's own.
Standard library + torch only: this runs in the framework's Python.
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from frameworks.pytorch.layouts.sharded_embedding import RowShardedEmbedding
from frameworks.pytorch.session import SpecialSession


# --- Wide & Deep ----------------------------------------------------------------------

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


# --- its batch and session ------------------------------------------------------------

def clicks_batch(cfg, batch_size, gen):
    """Wide & Deep's: dense features, deep and wide ids of each sparse field, a click each."""
    dense = torch.rand(batch_size, cfg["dense_fields"], generator=gen)
    deep = torch.randint(0, cfg["deep_vocab_size"], (batch_size, cfg["sparse_fields"]), generator=gen)
    wide = torch.randint(0, cfg["wide_vocab_size"], (batch_size, cfg["sparse_fields"]), generator=gen)
    clicks = torch.randint(0, 2, (batch_size,), generator=gen).float()
    return (dense, deep, wide), (clicks,)


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


session = WideDeepSession
