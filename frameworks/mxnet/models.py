"""ResNet-50 v1.5 and BERT-base pretraining as MXNet Gluon HybridBlocks.

Layer for layer the definitions of frameworks/pytorch/models/resnet50.py, bert_base.py: the same shapes,
the same parameter counts (tests/integration/test_framework_mxnet.py), the same
losses. Each block is a HybridBlock, so `hybridize()` (the suite's `compile`)
turns the whole step into one symbolic graph. MXNet-specific points:
- BatchNorm's running statistics are parameters with grad_req="null": counted out;
- the MLM decoder is a Dense that shares the word embedding's ParameterDict
  (GluonNLP's idiom for tied weights): its weight *is* the embedding, its bias is
  the only new parameter;
- token ids and labels are float32 NDArrays, as Gluon's Embedding and pick take them;
- MXNet 1.9 has no AdamW optimizer class, only the `adamw_update` operator;
  `AdamW` below registers one on it, with PyTorch's bias correction.
"""
import math

import mxnet as mx
import numpy as np
from mxnet.gluon import nn

from frameworks.common import choices, synthetic


# --- ResNet-50 v1.5 -------------------------------------------------------------

class Bottleneck(nn.HybridBlock):
    expansion = 4

    def __init__(self, cin, width, stride, **kwargs):
        super().__init__(**kwargs)
        cout = width * self.expansion
        with self.name_scope():
            self.conv1 = nn.Conv2D(width, 1, use_bias=False, in_channels=cin)
            self.bn1 = nn.BatchNorm(in_channels=width)
            # v1.5: the stride sits on the 3x3 convolution, not the first 1x1.
            self.conv2 = nn.Conv2D(width, 3, strides=stride, padding=1, use_bias=False,
                                   in_channels=width)
            self.bn2 = nn.BatchNorm(in_channels=width)
            self.conv3 = nn.Conv2D(cout, 1, use_bias=False, in_channels=width)
            self.bn3 = nn.BatchNorm(in_channels=cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.HybridSequential()
                self.down.add(nn.Conv2D(cout, 1, strides=stride, use_bias=False, in_channels=cin),
                              nn.BatchNorm(in_channels=cout))

    def hybrid_forward(self, F, x):
        identity = x if self.down is None else self.down(x)
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.bn3(self.conv3(x))
        return F.relu(x + identity)


class ResNet(nn.HybridBlock):
    def __init__(self, layers=(3, 4, 6, 3), width=64, num_classes=1000, **_):
        super().__init__(prefix="resnet_")
        with self.name_scope():
            self.stem = nn.HybridSequential()
            self.stem.add(nn.Conv2D(width, 7, strides=2, padding=3, use_bias=False, in_channels=3),
                          nn.BatchNorm(in_channels=width), nn.Activation("relu"),
                          nn.MaxPool2D(3, strides=2, padding=1))
            self.blocks = nn.HybridSequential()
            cin = width
            for stage, n in enumerate(layers):
                w = width * 2 ** stage
                for i in range(n):
                    self.blocks.add(Bottleneck(cin, w, 2 if (i == 0 and stage > 0) else 1))
                    cin = w * Bottleneck.expansion
            self.pool = nn.GlobalAvgPool2D()
            self.fc = nn.Dense(num_classes, in_units=cin)

    def hybrid_forward(self, F, x):
        return self.fc(F.flatten(self.pool(self.blocks(self.stem(x)))))


def resnet_init():
    # Kaiming-normal convolutions (He et al., as PyTorch's ResNets), BN gamma 1 / beta 0.
    return mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2)


# --- BERT pretraining (MLM + NSP) -------------------------------------------------

def _dense(units, cin, **kwargs):
    return nn.Dense(units, in_units=cin, flatten=False,
                    weight_initializer=mx.init.Normal(0.02), bias_initializer="zeros", **kwargs)


class EncoderLayer(nn.HybridBlock):
    def __init__(self, hidden, heads, intermediate, dropout, **kwargs):
        super().__init__(**kwargs)
        self.heads, self.dropout, self.scale = heads, dropout, 1.0 / math.sqrt(hidden // heads)
        with self.name_scope():
            self.qkv = _dense(3 * hidden, hidden)
            self.out = _dense(hidden, hidden)
            self.ln1 = nn.LayerNorm(epsilon=1e-12, in_channels=hidden)
            self.ff1 = _dense(intermediate, hidden)
            self.ff2 = _dense(hidden, intermediate)
            self.ln2 = nn.LayerNorm(epsilon=1e-12, in_channels=hidden)

    def hybrid_forward(self, F, x, mask_bias):
        # x: (b, s, h); mask_bias: (b, 1, 1, s), 0 where attended, -1e4 where masked.
        heads = self.heads
        qkv = F.reshape(self.qkv(x), shape=(0, 0, 3, heads, -1))         # (b, s, 3, H, d)
        qkv = F.transpose(qkv, axes=(2, 0, 3, 1, 4))                       # (3, b, H, s, d)
        q, k, v = F.split(qkv, num_outputs=3, axis=0, squeeze_axis=True)   # (b, H, s, d)
        q, k, v = (F.reshape(t, shape=(-3, 0, 0)) for t in (q, k, v))      # (b*H, s, d)
        scores = F.batch_dot(q, k, transpose_b=True) * self.scale          # (b*H, s, s)
        scores = F.reshape(scores, shape=(-4, -1, heads, 0, 0))            # (b, H, s, s)
        probs = F.softmax(F.broadcast_add(scores, mask_bias), axis=-1)
        probs = F.Dropout(F.reshape(probs, shape=(-3, 0, 0)), p=self.dropout)
        a = F.reshape(F.batch_dot(probs, v), shape=(-4, -1, heads, 0, 0))  # (b, H, s, d)
        a = F.reshape(F.transpose(a, axes=(0, 2, 1, 3)), shape=(0, 0, -3))  # (b, s, h)
        x = self.ln1(x + F.Dropout(self.out(a), p=self.dropout))
        y = self.ff2(F.LeakyReLU(self.ff1(x), act_type="gelu"))  # erf GELU, as PyTorch's
        return self.ln2(x + F.Dropout(y, p=self.dropout))


class BertForPretraining(nn.HybridBlock):
    def __init__(self, vocab_size=30522, hidden=768, layers=12, heads=12, intermediate=3072,
                 max_position=512, type_vocab=2, dropout=0.1, **_):
        super().__init__(prefix="bert_")
        self.dropout = dropout
        normal = mx.init.Normal(0.02)
        with self.name_scope():
            self.word = nn.Embedding(vocab_size, hidden, weight_initializer=normal)
            self.position = nn.Embedding(max_position, hidden, weight_initializer=normal)
            self.token_type = nn.Embedding(type_vocab, hidden, weight_initializer=normal)
            self.emb_ln = nn.LayerNorm(epsilon=1e-12, in_channels=hidden)
            self.layers = nn.HybridSequential()
            for _ in range(layers):
                self.layers.add(EncoderLayer(hidden, heads, intermediate, dropout))
            self.pooler = _dense(hidden, hidden)
            self.mlm_dense = _dense(hidden, hidden)
            self.mlm_ln = nn.LayerNorm(epsilon=1e-12, in_channels=hidden)
            # Tied decoder: this Dense takes the word embedding's ParameterDict, so its
            # weight is the embedding matrix (vocab, hidden); its bias is the MLM bias.
            self.decoder = nn.Dense(vocab_size, in_units=hidden, flatten=False,
                                    bias_initializer="zeros", params=self.word.collect_params())
            self.nsp = _dense(2, hidden)

    def hybrid_forward(self, F, tokens, token_types, attention_mask, masked_positions):
        pos = self.position(F.contrib.arange_like(tokens, axis=1))        # (s, h)
        x = F.broadcast_add(self.word(tokens) + self.token_type(token_types),
                            F.expand_dims(pos, axis=0))
        x = F.Dropout(self.emb_ln(x), p=self.dropout)
        # Key mask broadcast over heads and queries, as an additive bias.
        mask_bias = F.reshape((1 - attention_mask) * -1e4, shape=(0, 1, 1, -1))
        for layer in self.layers:
            x = layer(x, mask_bias)
        pooled = F.tanh(self.pooler(F.squeeze(F.slice_axis(x, axis=1, begin=0, end=1), axis=1)))
        # The MLM head runs on the masked positions only, as the references' (GluonNLP's
        # BERT decoder gathers them with gather_nd the same way): (B, P, H).
        rows = F.broadcast_like(F.expand_dims(F.contrib.arange_like(masked_positions, axis=0),
                                              axis=1), masked_positions)
        x = F.gather_nd(x, F.stack(rows, masked_positions, axis=0))
        h = self.mlm_ln(F.LeakyReLU(self.mlm_dense(x), act_type="gelu"))
        return self.decoder(h), self.nsp(pooled)  # (B, P, vocab), (B, 2)


def bert_init():
    return mx.init.Normal(0.02)  # only parameters without an initializer of their own use it


# --- losses ---------------------------------------------------------------------

def cross_entropy(F, logits, labels):
    """Mean cross-entropy over positions whose label is not -100 (PyTorch's ignore_index)."""
    logp = F.log_softmax(F.cast(logits, "float32"), axis=-1)
    keep = labels != -100
    nll = -F.pick(logp, labels * keep, axis=-1)  # ignored positions pick class 0, then drop
    return F.sum(nll * keep) / F.sum(keep)


class ResNetLoss(nn.HybridBlock):
    def hybrid_forward(self, F, logits, labels):
        return cross_entropy(F, logits, labels)


class BertLoss(nn.HybridBlock):
    def hybrid_forward(self, F, mlm_logits, nsp_logits, mlm_labels, nsp_labels):
        return cross_entropy(F, mlm_logits, mlm_labels) + cross_entropy(F, nsp_logits, nsp_labels)


class TrainStep(nn.HybridBlock):
    """Forward and loss in one block: what hybridize() compiles into one graph."""

    def __init__(self, model, loss, n_inputs):
        super().__init__(prefix="")
        self.n_inputs = n_inputs
        with self.name_scope():
            self.model = model
            self.loss = loss

    def hybrid_forward(self, F, *arrays):
        out = self.model(*arrays[:self.n_inputs])
        out = out if isinstance(out, (list, tuple)) else (out,)
        return self.loss(*out, *arrays[self.n_inputs:])


# --- synthetic batches ----------------------------------------------------------

def synthetic_batch(model_cfg, batch_size, seed, ctx):
    """The suite's synthetic batch (frameworks/common/synthetic.py: the same values in
    every framework), made once on ctx; ids and labels as float32 (Gluon's convention)."""
    inputs, labels = synthetic.arrays(model_cfg, batch_size, seed, int_dtype="float32")
    arr = lambda a: mx.nd.array(a, ctx=ctx, dtype="float32")  # noqa: E731
    return tuple(map(arr, inputs)), tuple(map(arr, labels))


MODELS = {"resnet50": (ResNet, ResNetLoss, resnet_init),
          "bert_base": (BertForPretraining, BertLoss, bert_init)}


def build_model(model_cfg):
    """(model, loss block, initializer) for the config."""
    model, loss, init = choices.pick(MODELS, model_cfg["name"], "model")
    return model(**model_cfg), loss(), init()


# --- optimizers -----------------------------------------------------------------

@mx.optimizer.register
class AdamW(mx.optimizer.Optimizer):
    """torch.optim.AdamW on MXNet's `adamw_update` operator (decoupled weight decay).

    adamw_update computes w -= eta * (lr * m / (sqrt(v) + eps) + wd * w) with no bias
    correction; with eta = the learning rate, lr = sqrt(1 - beta2^t) / (1 - beta1^t)
    it is PyTorch's update (epsilon applied to the uncorrected sqrt(v), as
    GluonNLP's BERTAdam does)."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon

    def create_state(self, index, weight):
        zeros = lambda: mx.nd.zeros(weight.shape, weight.context, dtype=weight.dtype)  # noqa: E731
        return zeros(), zeros()

    def update(self, index, weight, grad, state):
        self._update_count(index)
        t = self._index_update_count[index]
        correction = math.sqrt(1 - self.beta2 ** t) / (1 - self.beta1 ** t)
        mean, var = state
        mx.nd.contrib.adamw_update(
            weight, grad, mean, var, rescale_grad=self.rescale_grad, lr=correction,
            eta=self._get_lr(index), beta1=self.beta1, beta2=self.beta2, epsilon=self.epsilon,
            wd=self._get_wd(index), clip_gradient=self.clip_gradient or -1, out=weight)


def optimizer_args(model_cfg):
    """(name, kwargs) for gluon.Trainer: the same optimizer and hyper-parameters."""
    opt = model_cfg["optimizer"]
    return opt["name"], choices.pick(OPTIMIZERS, opt["name"], "optimizer")(opt)


# MXNet's SGD adds wd * w to the gradient before momentum, as torch's SGD.
OPTIMIZERS = {"sgd": lambda o: {"learning_rate": o["lr"], "momentum": o["momentum"], "wd": o["weight_decay"]},
              "adamw": lambda o: {"learning_rate": o["lr"], "wd": o["weight_decay"]}}


def trainable_parameters(block) -> dict:
    """name -> Parameter, grad_req != 'null'; a tied weight is one name, counted once."""
    return {n: p for n, p in block.collect_params().items() if p.grad_req != "null"}


def parameter_count(model_cfg: dict) -> int:
    """The count that must match frameworks.pytorch.models.parameter_count."""
    model, _, init = build_model(model_cfg)
    model.initialize(init)  # shapes are all given (in_channels / in_units), no forward needed
    return sum(int(np.prod(p.shape)) for p in trainable_parameters(model).values())
