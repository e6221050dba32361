"""The GPT of DLPerf's GPT cases: a Megatron-style decoder, the same model at every layout.

Learned token and position embeddings, `layers` pre-LayerNorm blocks (causal self-attention
with fused QKV, a GELU MLP of 4 x hidden, dropout as Megatron's), a final LayerNorm and an
output layer tied to the token embedding; causal LM loss on `seq_len + 1` tokens.

The model's definition knows nothing of parallelism (frameworks/pytorch/layouts/parallelize.py splits
it, by the plan `tp_plan` at the end of this module):
- its parts are named so that a tensor-parallel plan can address them (`embed.word`,
  `layers.<i>.qkv`, `head.output`, ...), and the fused QKV is laid out head by head
  ([head, q|k|v, head_dim]), as Megatron lays it out, so that splitting its output features
  into tp contiguous blocks gives each rank whole heads;
- a pipeline stage is the model with the parts of other stages dropped (`keep`): its forward
  takes tokens where it has the embedding, else hidden states, and returns logits where it has
  the head, else hidden states;
- parameters are made on any device, the meta device included, and `full_value` gives each
  one's initial value from a generator seeded by the seed and the parameter's name, so a shard
  of any layout holds exactly the values the single-device model holds there.

This module is a model family of frameworks/pytorch/lm_session.py: `Model`, `tied(cfg)`,
`loss_fn`, `full_value`, `parameter_count`, `synthetic_tokens`, its tensor-parallel plan
`tp_plan` (the names of its parts and how each splits; parallelize.py applies it) and its
`session`, the one its spec names (contract/models/gpt.py).
"""
import sys
import zlib

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, ParallelStyle, PrepareModuleOutput, RowwiseParallel,
                                               SequenceParallel)
from torch.utils.checkpoint import checkpoint

from frameworks.pytorch import models
from frameworks.pytorch.layouts import parallelize

IMPLEMENTATION = "dlbench gpt (frameworks/pytorch/models/gpt.py)"
INIT_STD = 0.02                  # Megatron's init_method_std
# The output layer is the token embedding; on a pipeline's last stage, a copy of it
TIED = {"head.output.weight": "embed.word.weight"}


def tied(cfg: dict) -> dict:
    """{output weight: embedding weight}: the GPT always ties them."""
    return TIED


class Embedding(nn.Module):
    def __init__(self, vocab_size, hidden, seq_len, dropout):
        super().__init__()
        self.word = nn.Embedding(vocab_size, hidden)
        self.position = nn.Embedding(seq_len, hidden)
        self.dropout = dropout

    def forward(self, tokens):
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        return F.dropout(self.word(tokens) + self.position(pos)[None], self.dropout, self.training)


class DecoderLayer(nn.Module):
    """Pre-LayerNorm block: causal self-attention, then a GELU MLP of 4 x hidden. Shapes are
    read from the projections' outputs, so the same code runs on a tensor-parallel rank's
    heads and on a sequence-parallel rank's part of the sequence."""

    def __init__(self, hidden, heads, dropout, recompute=False):
        super().__init__()
        self.head_dim, self.dropout, self.recompute = hidden // heads, dropout, recompute
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, 4 * hidden)
        self.fc2 = nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        if self.recompute and self.training:  # activation checkpointing: recomputed in backward
            return checkpoint(self._forward, x, use_reentrant=False)
        return self._forward(x)

    def _forward(self, x):
        p = self.dropout if self.training else 0.0
        qkv = self.qkv(self.ln1(x))
        b, s = qkv.shape[:2]
        q, k, v = qkv.view(b, s, -1, 3, self.head_dim).permute(3, 0, 2, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        x = x + F.dropout(self.out(a.transpose(1, 2).reshape(b, s, -1)), p, self.training)
        return x + F.dropout(self.fc2(F.gelu(self.fc1(self.ln2(x)))), p, self.training)


class Head(nn.Module):
    def __init__(self, hidden, vocab_size):
        super().__init__()
        self.ln_f = nn.LayerNorm(hidden)
        self.output = nn.Linear(hidden, vocab_size, bias=False)

    def forward(self, x):
        return self.output(self.ln_f(x))


class Model(nn.Module):
    def __init__(self, vocab_size, hidden, layers, heads, seq_len, dropout=0.1, recompute=False, **_):
        super().__init__()
        self.embed = Embedding(vocab_size, hidden, seq_len, dropout)
        self.layers = nn.ModuleDict({str(i): DecoderLayer(hidden, heads, dropout, recompute)
                                     for i in range(layers)})
        self.head = Head(hidden, vocab_size)
        self.tie()

    def tie(self):
        """The output layer is the token embedding (where one module holds both)."""
        if self.embed is not None and self.head is not None:
            self.head.output.weight = self.embed.word.weight

    def keep(self, layer_ids, first: bool, last: bool) -> "Model":
        return keep_stage(self, layer_ids, first, last, tied=True)

    def forward(self, x):
        h = self.embed(x) if self.embed is not None else x
        for layer in self.layers.values():
            h = layer(h)
        return self.head(h) if self.head is not None else h


def keep_stage(model, layer_ids, first: bool, last: bool, tied: bool):
    """A family's model as one pipeline stage: only the layers `layer_ids`, the embedding on
    the first stage, the head on the last (in place; returns the model). A tied output layer
    on a stage without the embedding becomes that stage's own copy."""
    for i in [k for k in model.layers if int(k) not in set(layer_ids)]:
        del model.layers[i]
    if not first:
        model.embed = None
    if not last:
        model.head = None
    if tied and model.head is not None and model.embed is None:
        model.head.output.weight = nn.Parameter(model.head.output.weight.detach().clone())
    return model


def loss_fn(logits, labels):
    return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())


def parameter_count(cfg: dict) -> int:
    """The model's parameters (the tied output layer counted once), from a meta-device build."""
    with torch.device("meta"):
        return models.count_parameters(Model(**cfg))


def seeded_normal(shape, std: float, seed: int, name: str) -> torch.Tensor:
    """N(0, std) values of parameter `name`, from a generator seeded by the seed and the name
    alone: the same values whatever the layout (every family's rule)."""
    gen = torch.Generator().manual_seed((seed * 1_000_003 + zlib.crc32(name.encode())) % 2**63)
    return torch.empty(shape).normal_(0.0, std, generator=gen)


def full_value(name: str, shape, seed: int) -> torch.Tensor:
    """The single-device model's initial value of parameter `name`: N(0, 0.02) weights of
    linear layers and embeddings, zero biases, LayerNorms at ones and zeros."""
    module, leaf = name.split(".")[-2:]
    if module.startswith("ln"):
        return torch.ones(shape) if leaf == "weight" else torch.zeros(shape)
    if leaf == "bias":
        return torch.zeros(shape)
    return seeded_normal(shape, INIT_STD, seed, TIED.get(name, name))  # a tied weight: one value


def synthetic_tokens(cfg: dict, rows: int, seed: int) -> torch.Tensor:
    """`rows` sequences of seq_len + 1 token ids, the same for a seed whatever the layout: a
    data-parallel rank takes its rows of the global batch, so one device sees them all.
    Ids come from `data_vocab_size` (the vocabulary before any tensor-parallel padding)."""
    vocab = cfg.get("data_vocab_size") or cfg["vocab_size"]
    return torch.randint(0, vocab, (rows, cfg["seq_len"] + 1), generator=torch.Generator().manual_seed(seed))


# ---- its split and its session ---------------------------------------------------------------
def tp_plan(model, sequence_parallel: bool) -> dict:
    """Megatron's splits of the GPT, as a parallelize_module plan
    (frameworks/pytorch/layouts/parallelize.py)."""
    seq = Shard(1) if sequence_parallel else Replicate()
    plan: dict[str, ParallelStyle] = {}
    if model.embed is not None:
        plan["embed.word"] = RowwiseParallel(input_layouts=Replicate(), output_layouts=Replicate())
        if sequence_parallel:  # the positions are added whole, then each rank keeps its part
            plan["embed"] = PrepareModuleOutput(output_layouts=Replicate(), desired_output_layouts=seq)
    for i in model.layers:
        plan.update({f"layers.{i}.qkv": ColwiseParallel(input_layouts=seq),
                     f"layers.{i}.out": RowwiseParallel(output_layouts=seq),
                     f"layers.{i}.fc1": ColwiseParallel(input_layouts=seq),
                     f"layers.{i}.fc2": RowwiseParallel(output_layouts=seq)})
        if sequence_parallel:
            plan.update({f"layers.{i}.ln1": SequenceParallel(), f"layers.{i}.ln2": SequenceParallel()})
    return {**plan, **parallelize.head_plan(model, "head.ln_f", sequence_parallel)}


def session(spec, dist):
    """A GPT point's training session at its layout (frameworks/pytorch/lm_session.py)."""
    from frameworks.pytorch import lm_session
    return lm_session.session_of(sys.modules[__name__])(spec, dist)
