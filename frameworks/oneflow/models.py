"""ResNet-50 v1.5 and BERT-base pretraining in OneFlow (its torch-like oneflow.nn).

The same layers, parameter counts and loss as the PyTorch reference
(frameworks/pytorch/models/resnet50.py, bert_base.py), built from the same model-config dict (full or
tiny sizes). OneFlow 0.9 has no fused scaled_dot_product_attention, so
attention is written out (softmax(QK^T/sqrt(d) + mask) V), as PyTorch's math
path computes it.
"""
import math


import oneflow as flow
from oneflow import nn
import oneflow.nn.functional as F
from frameworks.common import choices, synthetic
from contract import modes


# --- ResNet-50 v1.5 -------------------------------------------------------------

class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        # v1.5: the stride sits on the 3x3 convolution, not the first 1x1.
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.down is None else self.down(x)
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.bn3(self.conv3(x))
        return F.relu(x + identity)


class ResNet(nn.Module):
    def __init__(self, layers=(3, 4, 6, 3), width=64, num_classes=1000, **_):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False),
                                  nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                                  nn.MaxPool2d(3, stride=2, padding=1))
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
        return self.fc(flow.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# --- BERT pretraining (MLM + NSP) -------------------------------------------------

class EncoderLayer(nn.Module):
    def __init__(self, hidden, heads, intermediate, dropout):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.scale = 1.0 / math.sqrt(hidden // heads)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.ln1 = nn.LayerNorm(hidden, eps=1e-12)
        self.ff1 = nn.Linear(hidden, intermediate)
        self.ff2 = nn.Linear(intermediate, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x, mask_bias):
        b, s, h = x.shape
        qkv = self.qkv(x).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        p = self.dropout if self.training else 0.0
        scores = flow.matmul(q, k.transpose(-1, -2)) * self.scale + mask_bias.to(q.dtype)
        a = flow.matmul(F.dropout(F.softmax(scores, dim=-1), p, self.training), v)
        a = a.transpose(1, 2).reshape(b, s, h)
        x = self.ln1(x + F.dropout(self.out(a), p, self.training))
        y = self.ff2(F.gelu(self.ff1(x)))
        return self.ln2(x + F.dropout(y, p, self.training))


class BertForPretraining(nn.Module):
    def __init__(self, vocab_size=30522, hidden=768, layers=12, heads=12, intermediate=3072,
                 max_position=512, type_vocab=2, dropout=0.1, **_):
        super().__init__()
        self.word = nn.Embedding(vocab_size, hidden)
        self.position = nn.Embedding(max_position, hidden)
        self.token_type = nn.Embedding(type_vocab, hidden)
        self.emb_ln = nn.LayerNorm(hidden, eps=1e-12)
        self.dropout = dropout
        self.layers = nn.ModuleList([EncoderLayer(hidden, heads, intermediate, dropout)
                                     for _ in range(layers)])
        self.pooler = nn.Linear(hidden, hidden)
        self.mlm_dense = nn.Linear(hidden, hidden)
        self.mlm_ln = nn.LayerNorm(hidden, eps=1e-12)
        self.mlm_bias = nn.Parameter(flow.zeros(vocab_size))  # decoder weight is tied to `word`
        self.nsp = nn.Linear(hidden, 2)
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, tokens, token_types, attention_mask, masked_positions):
        s = tokens.shape[1]
        if tokens.is_global:  # graph-mode data parallel: tensors are global, with a placement
            pos = flow.arange(s, placement=tokens.placement, sbp=flow.sbp.broadcast)
        else:
            pos = flow.arange(s, device=tokens.device)
        x = self.word(tokens) + self.position(pos).unsqueeze(0) + self.token_type(token_types)
        x = F.dropout(self.emb_ln(x), self.dropout, self.training)
        # Additive key mask broadcast over heads and queries: 0 = attend, -1e4 = masked.
        mask_bias = (1.0 - attention_mask.to(flow.float32))[:, None, None, :] * -10000.0
        for layer in self.layers:
            x = layer(x, mask_bias)
        pooled = flow.tanh(self.pooler(x[:, 0]))
        # The MLM head runs on the masked positions only (B, P, H), as the references'.
        x = flow.gather(x, 1, masked_positions.unsqueeze(-1).expand(-1, -1, x.shape[-1]))
        h = self.mlm_ln(F.gelu(self.mlm_dense(x)))
        mlm_logits = flow.matmul(h, self.word.weight.to(h.dtype).t()) + self.mlm_bias.to(h.dtype)
        return mlm_logits, self.nsp(pooled)  # (B, P, vocab), (B, 2)


def bert_loss(outputs, mlm_labels, nsp_labels):
    mlm_logits, nsp_logits = outputs
    mlm = F.cross_entropy(mlm_logits.flatten(0, 1).float(), mlm_labels.flatten(), ignore_index=-100)
    return mlm + F.cross_entropy(nsp_logits.float(), nsp_labels)


def resnet_loss(logits, labels):
    return F.cross_entropy(logits.float(), labels)


# --- synthetic batches ----------------------------------------------------------

def synthetic_batch(model_cfg, batch_size, device, seed):
    """Fixed random inputs (frameworks/common/synthetic.py), made once on the device."""
    inputs, labels = synthetic.arrays(model_cfg, batch_size, seed)
    t = lambda arrays: tuple(flow.tensor(a, device=device) for a in arrays)  # noqa: E731
    return t(inputs), t(labels)


MODELS = {"resnet50": (ResNet, resnet_loss), "bert_base": (BertForPretraining, bert_loss)}
OPTIMIZERS = {
    "sgd": lambda o, params: flow.optim.SGD(params, lr=o["lr"], momentum=o["momentum"],
                                            weight_decay=o["weight_decay"]),
    "adamw": lambda o, params: flow.optim.AdamW(params, lr=o["lr"], weight_decay=o["weight_decay"]),
}


def build_model(model_cfg):
    model, loss = choices.pick(MODELS, model_cfg["name"], "model")
    return model(**model_cfg), loss


def build_optimizer(model_cfg, params, clip_in_group=False):
    """SGD or AdamW. `clip_in_group`: gradient clipping (BERT's recipe, when on) as the
    parameter group's `clip_grad_max_norm`, which nn.Graph compiles into its update (an
    eager step calls `oneflow.nn.utils.clip_grad_norm_` itself)."""
    opt = model_cfg["optimizer"]
    norm = modes.clip_norm(model_cfg)
    if clip_in_group and norm is not None:
        params = [{"params": list(params), "clip_grad_max_norm": norm, "clip_grad_norm_type": 2.0}]
    return choices.pick(OPTIMIZERS, opt["name"], "optimizer")(opt, params)


def count_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())  # tied weights count once


def parameter_count(model_cfg: dict) -> int:
    """The count that must match the PyTorch reference's (tests/integration)."""
    return count_parameters(build_model(model_cfg)[0])
