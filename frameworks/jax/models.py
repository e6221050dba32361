"""ResNet-50 v1.5 and BERT-base pretraining in Flax (linen), matching frameworks/pytorch/models/
(resnet50.py, bert_base.py).

The same layers and parameter counts as the PyTorch reference, in JAX's idiom:
images are NHWC (XLA's preferred layout; the batch has the same sizes as
PyTorch's NCHW one), BatchNorm statistics live in the `batch_stats` collection,
and mixed precision is Flax's own: every layer is built with a compute `dtype`
(bfloat16 for AMP) and `param_dtype=float32`, so the master weights and the
optimizer stay in float32 and each layer casts them for its maths. Losses are
computed in float32, as the reference's `.float()` does.
"""
from functools import partial

import jax
import jax.numpy as jnp
import flax.linen as nn
import numpy as np
import optax
from frameworks.common import choices, synthetic
from contract import modes


# --- ResNet-50 v1.5 -------------------------------------------------------------

_conv_init = nn.initializers.variance_scaling(2.0, "fan_out", "normal")  # torchvision's He init


class Bottleneck(nn.Module):
    width: int
    stride: int
    dtype: jnp.dtype = jnp.float32
    expansion = 4

    @nn.compact
    def __call__(self, x, train: bool):
        conv = partial(nn.Conv, use_bias=False, dtype=self.dtype, kernel_init=_conv_init)
        # PyTorch's BatchNorm2d: momentum 0.1 (Flax's 0.9), eps 1e-5.
        norm = partial(nn.BatchNorm, use_running_average=not train, momentum=0.9, epsilon=1e-5,
                       dtype=self.dtype)
        cout = self.width * self.expansion
        identity = x
        if self.stride != 1 or x.shape[-1] != cout:
            identity = conv(cout, (1, 1), strides=self.stride, name="down_conv")(x)
            identity = norm(name="down_bn")(identity)
        y = nn.relu(norm(name="bn1")(conv(self.width, (1, 1), name="conv1")(x)))
        # v1.5: the stride sits on the 3x3 convolution, not the first 1x1.
        y = conv(self.width, (3, 3), strides=self.stride, padding=((1, 1), (1, 1)), name="conv2")(y)
        y = nn.relu(norm(name="bn2")(y))
        y = norm(name="bn3")(conv(cout, (1, 1), name="conv3")(y))
        return nn.relu(y + identity)


class ResNet(nn.Module):
    layers: tuple = (3, 4, 6, 3)
    width: int = 64
    num_classes: int = 1000
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x, train: bool = True):
        x = x.astype(self.dtype)
        x = nn.Conv(self.width, (7, 7), strides=2, padding=((3, 3), (3, 3)), use_bias=False,
                    dtype=self.dtype, kernel_init=_conv_init, name="stem_conv")(x)
        x = nn.BatchNorm(use_running_average=not train, momentum=0.9, epsilon=1e-5,
                         dtype=self.dtype, name="stem_bn")(x)
        x = nn.max_pool(nn.relu(x), (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))
        for stage, n in enumerate(self.layers):
            for i in range(n):
                x = Bottleneck(self.width * 2 ** stage, 2 if (i == 0 and stage > 0) else 1,
                               dtype=self.dtype, name=f"stage{stage}_block{i}")(x, train)
        x = jnp.mean(x, axis=(1, 2))  # adaptive average pooling to 1x1
        return nn.Dense(self.num_classes, dtype=self.dtype, name="fc")(x)


# --- BERT pretraining (MLM + NSP) -------------------------------------------------

_normal = nn.initializers.normal(stddev=0.02)


class EncoderLayer(nn.Module):
    hidden: int
    heads: int
    intermediate: int
    dropout: float
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x, mask, train: bool):
        dense = partial(nn.Dense, dtype=self.dtype, kernel_init=_normal)
        ln = partial(nn.LayerNorm, epsilon=1e-12, dtype=self.dtype)
        b, s, h = x.shape
        qkv = dense(3 * h, name="qkv")(x).reshape(b, s, 3, self.heads, h // self.heads)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]  # (batch, seq, heads, head_dim)
        a = nn.dot_product_attention(
            q, k, v, mask=mask, dropout_rate=self.dropout, deterministic=not train,
            dropout_rng=self.make_rng("dropout") if train and self.dropout > 0 else None,
            broadcast_dropout=False, dtype=self.dtype)
        a = dense(h, name="out")(a.reshape(b, s, h))
        x = ln(name="ln1")(x + nn.Dropout(self.dropout, deterministic=not train)(a))
        y = dense(h, name="ff2")(nn.gelu(dense(self.intermediate, name="ff1")(x), approximate=False))
        return ln(name="ln2")(x + nn.Dropout(self.dropout, deterministic=not train)(y))


class BertForPretraining(nn.Module):
    vocab_size: int = 30522
    hidden: int = 768
    layers: int = 12
    heads: int = 12
    intermediate: int = 3072
    max_position: int = 512
    type_vocab: int = 2
    dropout: float = 0.1
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, tokens, token_types, attention_mask, masked_positions, train: bool = True):
        embed = partial(nn.Embed, features=self.hidden, dtype=self.dtype, embedding_init=_normal)
        dense = partial(nn.Dense, dtype=self.dtype, kernel_init=_normal)
        ln = partial(nn.LayerNorm, epsilon=1e-12, dtype=self.dtype)
        word = embed(self.vocab_size, name="word")
        s = tokens.shape[1]
        x = (word(tokens) + embed(self.max_position, name="position")(jnp.arange(s))[None]
             + embed(self.type_vocab, name="token_type")(token_types))
        x = nn.Dropout(self.dropout, deterministic=not train)(ln(name="emb_ln")(x))
        # Boolean key mask broadcast over heads and queries: True = attend.
        mask = attention_mask[:, None, None, :].astype(bool)
        for i in range(self.layers):
            x = EncoderLayer(self.hidden, self.heads, self.intermediate, self.dropout,
                             dtype=self.dtype, name=f"layer{i}")(x, mask, train)
        pooled = jnp.tanh(dense(self.hidden, name="pooler")(x[:, 0]))
        # The MLM head runs on the masked positions only (B, P, H), as the references'.
        x = jnp.take_along_axis(x, masked_positions[:, :, None], axis=1)
        h = ln(name="mlm_ln")(nn.gelu(dense(self.hidden, name="mlm_dense")(x), approximate=False))
        mlm_bias = self.param("mlm_bias", nn.initializers.zeros, (self.vocab_size,), jnp.float32)
        mlm_logits = word.attend(h) + mlm_bias.astype(self.dtype)  # decoder tied to `word`
        return mlm_logits, dense(2, name="nsp")(pooled)


# --- losses ---------------------------------------------------------------------

def classification_loss(logits, labels):
    return optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), labels).mean()


def bert_loss(outputs, mlm_labels, nsp_labels):
    """Cross-entropy over the gathered predictions (label -100, padding, is ignored) plus
    NSP, as PyTorch's."""
    mlm_logits, nsp_logits = outputs
    keep = mlm_labels != -100
    ce = optax.softmax_cross_entropy_with_integer_labels(
        mlm_logits.astype(jnp.float32), jnp.where(keep, mlm_labels, 0))
    mlm = jnp.sum(jnp.where(keep, ce, 0.0)) / jnp.maximum(jnp.sum(keep), 1)
    return mlm + classification_loss(nsp_logits, nsp_labels)


# --- synthetic batches ----------------------------------------------------------

def synthetic_batch(model_cfg, batch_size, seed):
    """Fixed random inputs as numpy arrays, NHWC (the worker places them on its device once)."""
    return synthetic.arrays(model_cfg, batch_size, seed, channels_last=True, int_dtype="int32")


BERT_KEYS = ("vocab_size", "hidden", "layers", "heads", "intermediate", "max_position",
             "type_vocab", "dropout")
MODELS = {
    "resnet50": (lambda c, dtype: ResNet(layers=tuple(c["layers"]), width=c["width"],
                                         num_classes=c["num_classes"], dtype=dtype), classification_loss),
    "bert_base": (lambda c, dtype: BertForPretraining(**{k: c[k] for k in BERT_KEYS if k in c},
                                                      dtype=dtype), bert_loss),
}
OPTIMIZERS = {
    "sgd": lambda o: optax.chain(optax.add_decayed_weights(o["weight_decay"]),
                                 optax.sgd(o["lr"], momentum=o["momentum"])),
    "adamw": lambda o: optax.adamw(o["lr"], b1=0.9, b2=0.999, eps=1e-8, weight_decay=o["weight_decay"]),
}


def build_model(model_cfg, dtype=jnp.float32):
    """(module, loss_fn); `dtype` is the compute dtype (bfloat16 for AMP)."""
    model, loss = choices.pick(MODELS, model_cfg["name"], "model")
    return model(model_cfg, dtype), loss


def init_variables(model, inputs, seed):
    """{'params': ..., 'batch_stats': ...} for the module, from its inputs' shapes."""
    keys = jax.random.split(jax.random.PRNGKey(seed), 2)
    return model.init({"params": keys[0], "dropout": keys[1]}, *inputs, train=False)


def build_optimizer(model_cfg):
    """PyTorch's optimizers: SGD with momentum and coupled weight decay; AdamW (decoupled),
    both applied to every parameter as torch.optim does. With gradient clipping (BERT's
    recipe) `optax.clip_by_global_norm` comes first in the chain: the worker hands the
    optimizer the gradients already averaged over ranks, so the norm is the global one."""
    opt = model_cfg["optimizer"]
    tx = choices.pick(OPTIMIZERS, opt["name"], "optimizer")(opt)
    norm = modes.clip_norm(model_cfg)
    return tx if norm is None else optax.chain(optax.clip_by_global_norm(norm), tx)


def parameter_count(model_cfg: dict) -> int:
    """Trainable parameters (tied weights once; BatchNorm statistics are not parameters),
    from shapes only: nothing is allocated."""
    model, _ = build_model(model_cfg)
    inputs, _ = synthetic_batch(model_cfg, 1, 0)
    shapes = jax.eval_shape(lambda: init_variables(model, inputs, 0))
    return int(sum(np.prod(p.shape) for p in jax.tree_util.tree_leaves(shapes["params"])))
