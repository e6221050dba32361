"""ResNet-50 v1.5 and BERT-base pretraining in PaddlePaddle (paddle.nn, dynamic graph).

Layer for layer the definitions of frameworks/pytorch/models/resnet50.py, bert_base.py: the same shapes,
the same parameter counts (tests/integration/test_frameworks.py), the same
losses. Paddle-specific points:
- BatchNorm's running mean and variance are non-trainable *parameters* in Paddle,
  so counts and the optimizer take the trainable parameters only;
- `F.cross_entropy(..., ignore_index=-100, reduction="mean")` divides by all
  positions, ignored ones included, so the MLM loss is a sum over the masked
  positions divided by their number, as PyTorch's mean is;
- `F.scaled_dot_product_attention` takes [batch, seq, heads, head_dim].
"""
import numpy as np
import paddle
from paddle import nn
import paddle.nn.functional as F

from frameworks.common import choices, synthetic
from contract import modes


# --- ResNet-50 v1.5 -------------------------------------------------------------

class BatchNorm2D(nn.BatchNorm2D):
    """nn.BatchNorm2D that takes a bf16 input on a CPU. Paddle's CPU batch_norm kernel is
    fp32/fp64 only, and bf16 AMP (to_static, level O1) hands it the bf16 output of the
    convolution before it (the in-place batch_norm_ escapes AMP's black list), so the
    input is cast up here, as AMP would for a black-listed op. Same parameters."""

    def forward(self, x):
        if x.dtype == paddle.bfloat16 and paddle.get_device() == "cpu":
            x = x.astype("float32")
        return super().forward(x)


class Bottleneck(nn.Layer):
    expansion = 4

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2D(cin, width, 1, bias_attr=False)
        self.bn1 = BatchNorm2D(width)
        # v1.5: the stride sits on the 3x3 convolution, not the first 1x1.
        self.conv2 = nn.Conv2D(width, width, 3, stride=stride, padding=1, bias_attr=False)
        self.bn2 = BatchNorm2D(width)
        self.conv3 = nn.Conv2D(width, cout, 1, bias_attr=False)
        self.bn3 = BatchNorm2D(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2D(cin, cout, 1, stride=stride, bias_attr=False),
                                      BatchNorm2D(cout))

    def forward(self, x):
        identity = x if self.down is None else self.down(x)
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.bn3(self.conv3(x))
        return F.relu(x + identity)


class ResNet(nn.Layer):
    def __init__(self, layers=(3, 4, 6, 3), width=64, num_classes=1000, **_):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2D(3, width, 7, stride=2, padding=3, bias_attr=False),
                                  BatchNorm2D(width), nn.ReLU(),
                                  nn.MaxPool2D(3, stride=2, padding=1))
        blocks, cin = [], width
        for stage, n in enumerate(layers):
            w = width * 2 ** stage
            for i in range(n):
                blocks.append(Bottleneck(cin, w, 2 if (i == 0 and stage > 0) else 1))
                cin = w * Bottleneck.expansion
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(paddle.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# --- BERT pretraining (MLM + NSP) -------------------------------------------------

_NORMAL = nn.initializer.Normal(std=0.02)


def _linear(cin, cout):
    """nn.Linear with BERT's init: N(0, 0.02) weights, zero biases."""
    return nn.Linear(cin, cout, weight_attr=paddle.ParamAttr(initializer=_NORMAL),
                     bias_attr=paddle.ParamAttr(initializer=nn.initializer.Constant(0.0)))


class EncoderLayer(nn.Layer):
    def __init__(self, hidden, heads, intermediate, dropout):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.qkv = _linear(hidden, 3 * hidden)
        self.out = _linear(hidden, hidden)
        self.ln1 = nn.LayerNorm(hidden, epsilon=1e-12)
        self.ff1 = _linear(hidden, intermediate)
        self.ff2 = _linear(intermediate, hidden)
        self.ln2 = nn.LayerNorm(hidden, epsilon=1e-12)

    def forward(self, x, mask):
        b, s, h = x.shape
        qkv = self.qkv(x).reshape([b, s, 3, self.heads, h // self.heads])
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]  # [b, s, heads, head_dim]
        p = self.dropout if self.training else 0.0
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p,
                                           training=self.training)
        a = a.reshape([b, s, h])
        x = self.ln1(x + F.dropout(self.out(a), p, training=self.training))
        y = self.ff2(F.gelu(self.ff1(x)))
        return self.ln2(x + F.dropout(y, p, training=self.training))


class BertForPretraining(nn.Layer):
    def __init__(self, vocab_size=30522, hidden=768, layers=12, heads=12, intermediate=3072,
                 max_position=512, type_vocab=2, dropout=0.1, **_):
        super().__init__()
        emb = paddle.ParamAttr(initializer=_NORMAL)
        self.word = nn.Embedding(vocab_size, hidden, weight_attr=emb)
        self.position = nn.Embedding(max_position, hidden, weight_attr=emb)
        self.token_type = nn.Embedding(type_vocab, hidden, weight_attr=emb)
        self.emb_ln = nn.LayerNorm(hidden, epsilon=1e-12)
        self.dropout = dropout
        self.layers = nn.LayerList([EncoderLayer(hidden, heads, intermediate, dropout)
                                    for _ in range(layers)])
        self.pooler = _linear(hidden, hidden)
        self.mlm_dense = _linear(hidden, hidden)
        self.mlm_ln = nn.LayerNorm(hidden, epsilon=1e-12)
        # The decoder weight is tied to `word`; only its bias is a parameter of its own.
        self.mlm_bias = self.create_parameter([vocab_size], is_bias=True,
                                              default_initializer=nn.initializer.Constant(0.0))
        self.nsp = _linear(hidden, 2)

    def forward(self, tokens, token_types, attention_mask, masked_positions):
        b, s = tokens.shape[0], tokens.shape[1]
        pos = paddle.arange(s, dtype="int64")
        x = self.word(tokens) + self.position(pos).unsqueeze(0) + self.token_type(token_types)
        x = F.dropout(self.emb_ln(x), self.dropout, training=self.training)
        # Boolean key mask broadcast over heads and queries: True = attend.
        mask = attention_mask.unsqueeze([1, 2]).astype("bool")
        for layer in self.layers:
            x = layer(x, mask)
        pooled = paddle.tanh(self.pooler(x[:, 0]))
        # The MLM head runs on the masked positions only, as the references' (PaddleNLP's
        # BertPretrainingHeads gathers rows of the flattened output the same way).
        p, hidden = masked_positions.shape[1], x.shape[-1]
        rows = masked_positions + paddle.arange(b, dtype=masked_positions.dtype).unsqueeze(1) * s
        x = paddle.gather(x.reshape([-1, hidden]), rows.flatten()).reshape([b, p, hidden])
        h = self.mlm_ln(F.gelu(self.mlm_dense(x)))
        mlm_logits = paddle.matmul(h, self.word.weight, transpose_y=True) + self.mlm_bias
        return mlm_logits, self.nsp(pooled)  # (B, P, vocab), (B, 2)


def bert_loss(outputs, mlm_labels, nsp_labels):
    mlm_logits, nsp_logits = outputs
    labels = mlm_labels.flatten()
    logits = mlm_logits.flatten(0, 1).astype("float32")
    # Paddle's "mean" counts ignored positions too; PyTorch's (the reference) does not.
    total = F.cross_entropy(logits, labels, ignore_index=-100, reduction="sum")
    mlm = total / (labels != -100).astype("float32").sum()
    return mlm + F.cross_entropy(nsp_logits.astype("float32"), nsp_labels)


def classification_loss(out, y):
    return F.cross_entropy(out.astype("float32"), y)


# --- synthetic batches ----------------------------------------------------------

def synthetic_batch(model_cfg, batch_size, seed):
    """The suite's synthetic batch (frameworks/common/synthetic.py: the same values in
    every framework), made once as tensors on the current device (paddle.set_device)."""
    inputs, labels = synthetic.arrays(model_cfg, batch_size, seed)
    return tuple(map(paddle.to_tensor, inputs)), tuple(map(paddle.to_tensor, labels))


MODELS = {"resnet50": (ResNet, classification_loss), "bert_base": (BertForPretraining, bert_loss)}
# Paddle's Momentum with a float weight_decay adds L2 to the gradient, as torch's SGD.
OPTIMIZERS = {
    "sgd": lambda o, params, clip: paddle.optimizer.Momentum(
        learning_rate=o["lr"], momentum=o["momentum"], parameters=params, weight_decay=o["weight_decay"],
        grad_clip=clip),
    "adamw": lambda o, params, clip: paddle.optimizer.AdamW(
        learning_rate=o["lr"], parameters=params, weight_decay=o["weight_decay"], grad_clip=clip),
}


def build_model(model_cfg):
    model, loss = choices.pick(MODELS, model_cfg["name"], "model")
    return model(**model_cfg), loss


def trainable_parameters(model):
    return [p for p in model.parameters() if not p.stop_gradient]


def build_optimizer(model_cfg, params):
    """Momentum or AdamW; with gradient clipping on (BERT's recipe) the optimizer's own
    `grad_clip=ClipGradByGlobalNorm`, which runs in its step: after DataParallel's
    all-reduce, and after GradScaler has unscaled the gradients."""
    opt = model_cfg["optimizer"]
    norm = modes.clip_norm(model_cfg)
    clip = None if norm is None else nn.ClipGradByGlobalNorm(clip_norm=norm)
    return choices.pick(OPTIMIZERS, opt["name"], "optimizer")(opt, params, clip)


def count_parameters(model) -> int:
    # Trainable only: BatchNorm's running statistics are parameters in Paddle, buffers in
    # PyTorch. Tied weights are one parameter object, so they count once.
    return sum(int(np.prod(p.shape)) for p in trainable_parameters(model))


def parameter_count(model_cfg: dict) -> int:
    """The count that must match frameworks.pytorch.models.parameter_count."""
    return count_parameters(build_model(model_cfg)[0])
