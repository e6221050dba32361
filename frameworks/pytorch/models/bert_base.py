"""BERT-base pretraining (MLM + NSP) in plain PyTorch, trained in the plain data-parallel session.

The definition every other framework matches (frameworks/<name>/models.py): the same layers,
the same parameter count (tests/unit/test_models.py), the same loss. The MLM head (transform
and tied decoder) runs on the `masked_positions` of the synthetic batch only, gathered from the
encoder's output, as the reference pretraining scripts do: logits are (batch,
max_predictions_per_seq, vocab).
Standard library + torch only: this runs in the framework's Python.
"""
import torch
from torch import nn
import torch.nn.functional as F

from frameworks.pytorch.session import TorchSession


# --- BERT pretraining (MLM + NSP) -------------------------------------------------

class EncoderLayer(nn.Module):
    def __init__(self, hidden, heads, intermediate, dropout):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.ln1 = nn.LayerNorm(hidden, eps=1e-12)
        self.ff1 = nn.Linear(hidden, intermediate)
        self.ff2 = nn.Linear(intermediate, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x, mask):
        b, s, h = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        p = self.dropout if self.training else 0.0
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)  # fused where possible
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
        self.layers = nn.ModuleList(EncoderLayer(hidden, heads, intermediate, dropout)
                                    for _ in range(layers))
        self.pooler = nn.Linear(hidden, hidden)
        self.mlm_dense = nn.Linear(hidden, hidden)
        self.mlm_ln = nn.LayerNorm(hidden, eps=1e-12)
        self.mlm_bias = nn.Parameter(torch.zeros(vocab_size))  # decoder weight is tied to `word`
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
        pos = torch.arange(s, device=tokens.device)
        x = self.word(tokens) + self.position(pos)[None] + self.token_type(token_types)
        x = F.dropout(self.emb_ln(x), self.dropout, self.training)
        # Boolean key mask broadcast over heads and queries: True = attend.
        mask = attention_mask[:, None, None, :].bool()
        for layer in self.layers:
            x = layer(x, mask)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        # The MLM head runs on the masked positions only (B, P, H), as the references'.
        x = torch.gather(x, 1, masked_positions[:, :, None].expand(-1, -1, x.shape[-1]))
        h = self.mlm_ln(F.gelu(self.mlm_dense(x)))
        mlm_logits = h @ self.word.weight.t() + self.mlm_bias  # (B, P, vocab)
        return mlm_logits, self.nsp(pooled)


def loss_fn(outputs, mlm_labels, nsp_labels):
    """MLM cross-entropy over the gathered predictions (label -100: padding) plus NSP."""
    mlm_logits, nsp_logits = outputs
    mlm = F.cross_entropy(mlm_logits.flatten(0, 1).float(), mlm_labels.flatten(), ignore_index=-100)
    return mlm + F.cross_entropy(nsp_logits.float(), nsp_labels)


Model = BertForPretraining
session = TorchSession   # device, DDP, compile, AMP, BERT's clipping: the plain data-parallel session
