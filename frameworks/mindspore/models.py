"""ResNet-50 v1.5 and BERT-base pretraining as MindSpore Cells.

The same layers, parameter counts and loss as the PyTorch reference
(frameworks/pytorch/models/resnet50.py, bert_base.py), built from the same model-config dict (full or
tiny sizes). Parameters are MindSpore's trainable ones: BatchNorm's moving
mean and variance are state, as PyTorch's running statistics are buffers.
"""
import math

import numpy as np

import mindspore as ms
from mindspore import nn, ops
from mindspore.common.initializer import Normal
from frameworks.common import choices, synthetic


# --- ResNet-50 v1.5 -------------------------------------------------------------

def _conv(cin, cout, k, stride=1, padding=0):
    return nn.Conv2d(cin, cout, k, stride=stride, pad_mode="pad", padding=padding, has_bias=False)


def _bn(c):
    # MindSpore's momentum is the running statistics' decay: 0.9 = PyTorch's momentum 0.1.
    return nn.BatchNorm2d(c, eps=1e-5, momentum=0.9)


class Bottleneck(nn.Cell):
    expansion = 4

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * self.expansion
        self.conv1 = _conv(cin, width, 1)
        self.bn1 = _bn(width)
        # v1.5: the stride sits on the 3x3 convolution, not the first 1x1.
        self.conv2 = _conv(width, width, 3, stride=stride, padding=1)
        self.bn2 = _bn(width)
        self.conv3 = _conv(width, cout, 1)
        self.bn3 = _bn(cout)
        self.relu = nn.ReLU()
        self.has_down = stride != 1 or cin != cout
        if self.has_down:
            self.down = nn.SequentialCell([_conv(cin, cout, 1, stride=stride), _bn(cout)])

    def construct(self, x):
        identity = self.down(x) if self.has_down else x
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.relu(self.bn2(self.conv2(x)))
        x = self.bn3(self.conv3(x))
        return self.relu(x + identity)


class ResNet(nn.Cell):
    def __init__(self, layers=(3, 4, 6, 3), width=64, num_classes=1000, **_):
        super().__init__()
        self.stem = nn.SequentialCell([
            _conv(3, width, 7, stride=2, padding=3), _bn(width), nn.ReLU(),
            nn.MaxPool2d(kernel_size=3, stride=2, pad_mode="pad", padding=1)])
        blocks, cin = [], width
        for stage, n in enumerate(layers):
            w = width * 2 ** stage
            for i in range(n):
                blocks.append(Bottleneck(cin, w, 2 if (i == 0 and stage > 0) else 1))
                cin = w * Bottleneck.expansion
        self.blocks = nn.SequentialCell(blocks)
        self.fc = nn.Dense(cin, num_classes)

    def construct(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(ops.mean(x, axis=(2, 3)))


# --- BERT pretraining (MLM + NSP) -------------------------------------------------

def _dense(cin, cout):
    return nn.Dense(cin, cout, weight_init=Normal(0.02), bias_init="zeros")


class EncoderLayer(nn.Cell):
    def __init__(self, hidden, heads, intermediate, dropout):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.qkv = _dense(hidden, 3 * hidden)
        self.out = _dense(hidden, hidden)
        self.ln1 = nn.LayerNorm((hidden,), epsilon=1e-12)
        self.ff1 = _dense(hidden, intermediate)
        self.ff2 = _dense(intermediate, hidden)
        self.ln2 = nn.LayerNorm((hidden,), epsilon=1e-12)
        self.attn_drop = nn.Dropout(p=dropout)
        self.drop1 = nn.Dropout(p=dropout)
        self.drop2 = nn.Dropout(p=dropout)

    def construct(self, x, mask_bias):
        b, s, h = x.shape
        qkv = self.qkv(x).reshape(b, s, 3, self.heads, self.head_dim).transpose(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = ops.matmul(q, k.swapaxes(-1, -2)) * self.scale + mask_bias.astype(q.dtype)
        a = ops.matmul(self.attn_drop(ops.softmax(scores, axis=-1)), v)
        a = a.transpose(0, 2, 1, 3).reshape(b, s, h)
        x = self.ln1(x + self.drop1(self.out(a)))
        y = self.ff2(ops.gelu(self.ff1(x), approximate="none"))
        return self.ln2(x + self.drop2(y))


class BertForPretraining(nn.Cell):
    def __init__(self, vocab_size=30522, hidden=768, layers=12, heads=12, intermediate=3072,
                 max_position=512, type_vocab=2, dropout=0.1, **_):
        super().__init__()
        self.word = nn.Embedding(vocab_size, hidden, embedding_table=Normal(0.02))
        self.position = nn.Embedding(max_position, hidden, embedding_table=Normal(0.02))
        self.token_type = nn.Embedding(type_vocab, hidden, embedding_table=Normal(0.02))
        self.emb_ln = nn.LayerNorm((hidden,), epsilon=1e-12)
        self.emb_drop = nn.Dropout(p=dropout)
        self.layers = nn.CellList([EncoderLayer(hidden, heads, intermediate, dropout)
                                   for _ in range(layers)])
        self.pooler = _dense(hidden, hidden)
        self.mlm_dense = _dense(hidden, hidden)
        self.mlm_ln = nn.LayerNorm((hidden,), epsilon=1e-12)
        # The decoder's weight is tied to `word`: only its bias is a parameter of its own.
        self.mlm_bias = ms.Parameter(ms.Tensor(np.zeros(vocab_size, np.float32)), name="mlm_bias")
        self.nsp = _dense(hidden, 2)

    def construct(self, tokens, token_types, attention_mask, masked_positions):
        b, s = tokens.shape[0], tokens.shape[1]
        pos = ops.arange(s).astype(ms.int32)
        x = self.word(tokens) + self.position(pos).expand_dims(0) + self.token_type(token_types)
        x = self.emb_drop(self.emb_ln(x))
        # Additive key mask broadcast over heads and queries: 0 = attend, -1e4 = masked.
        mask_bias = (1.0 - attention_mask.astype(ms.float32))[:, None, None, :] * -10000.0
        for layer in self.layers:
            x = layer(x, mask_bias)
        pooled = ops.tanh(self.pooler(x[:, 0]))
        # The MLM head runs on the masked positions only, as the references' (model_zoo's
        # BERT gathers rows of the flattened output the same way): (B, P, H).
        p, hidden = masked_positions.shape[1], x.shape[-1]
        rows = masked_positions + ops.arange(b).astype(masked_positions.dtype).reshape(b, 1) * s
        x = ops.gather(x.reshape(-1, hidden), rows.reshape(-1), 0).reshape(b, p, hidden)
        h = self.mlm_ln(ops.gelu(self.mlm_dense(x), approximate="none"))
        table = self.word.embedding_table
        mlm_logits = ops.matmul(h, table.astype(h.dtype).T) + self.mlm_bias.astype(h.dtype)
        return mlm_logits, self.nsp(pooled)  # (B, P, vocab), (B, 2)


def bert_loss(outputs, mlm_labels, nsp_labels):
    mlm_logits, nsp_logits = outputs
    v = mlm_logits.shape[-1]
    mlm = ops.cross_entropy(mlm_logits.reshape(-1, v).astype(ms.float32), mlm_labels.reshape(-1),
                            ignore_index=-100)
    return mlm + ops.cross_entropy(nsp_logits.astype(ms.float32), nsp_labels)


def resnet_loss(logits, labels):
    return ops.cross_entropy(logits.astype(ms.float32), labels)


# --- synthetic batches ----------------------------------------------------------

def synthetic_batch(model_cfg, batch_size, seed):
    """Fixed random inputs (frameworks/common/synthetic.py), made once as device tensors."""
    inputs, labels = synthetic.arrays(model_cfg, batch_size, seed, int_dtype="int32")
    return tuple(ms.Tensor(a) for a in inputs), tuple(ms.Tensor(a) for a in labels)


def _adamw(o, params):
    """mindspore.experimental.optim.AdamW: PyTorch's algorithm (bias correction, decoupled
    weight decay, eps 1e-8), unlike nn.AdamWeightDecay."""
    from mindspore.experimental.optim import AdamW
    return AdamW(params, lr=o["lr"], weight_decay=o["weight_decay"])


MODELS = {"resnet50": (ResNet, resnet_loss), "bert_base": (BertForPretraining, bert_loss)}
OPTIMIZERS = {
    "sgd": lambda o, params: nn.SGD(params, learning_rate=o["lr"], momentum=o["momentum"],
                                    weight_decay=o["weight_decay"]),
    "adamw": _adamw,
}


def build_model(model_cfg):
    model, loss = choices.pick(MODELS, model_cfg["name"], "model")
    return model(**model_cfg), loss


def build_optimizer(model_cfg, params):
    """SGD with momentum or AdamW, with the reference's hyper-parameters."""
    opt = model_cfg["optimizer"]
    return choices.pick(OPTIMIZERS, opt["name"], "optimizer")(opt, params)


def count_parameters(model) -> int:
    # trainable_params() lists a tied Parameter once, as torch's parameters() does.
    return sum(int(np.prod(p.shape)) for p in model.trainable_params())


def parameter_count(model_cfg: dict) -> int:
    """The count that must match the PyTorch reference's (tests/integration)."""
    ms.set_device("CPU")
    return count_parameters(build_model(model_cfg)[0])
