"""Training through attnc's backward: a small two-layer transformer language model, trained for
50 steps on random arithmetic sequences with attnc.torch.attention, beside the same model (same initial
weights, same batches) with torch's scaled_dot_product_attention. Prints both loss curves; the
test (tests/python/test_training.py) checks that they agree.

    python examples/training/train.py
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

import attnc.torch

VOCAB, D_MODEL, HEADS, LAYERS, SEQ, BATCH, STEPS = 16, 32, 4, 2, 16, 16, 50
SPEC = "heads=%d d_k=%d mask=causal" % (HEADS, D_MODEL // HEADS)


class Block(nn.Module):
    """Pre-norm attention and MLP, each added back to the residual stream."""

    def __init__(self, attention):
        super().__init__()
        self.attention = attention
        self.norm1, self.norm2 = nn.LayerNorm(D_MODEL), nn.LayerNorm(D_MODEL)
        self.qkv, self.out = nn.Linear(D_MODEL, 3 * D_MODEL), nn.Linear(D_MODEL, D_MODEL)
        self.mlp = nn.Sequential(nn.Linear(D_MODEL, 4 * D_MODEL), nn.GELU(),
                                 nn.Linear(4 * D_MODEL, D_MODEL))

    def forward(self, x):
        batch, seq, _ = x.shape
        q, k, v = (t.reshape(batch, seq, HEADS, D_MODEL // HEADS).transpose(1, 2)
                   for t in self.qkv(self.norm1(x)).chunk(3, dim=-1))
        o = self.attention(q, k, v).transpose(1, 2).reshape(batch, seq, D_MODEL)
        x = x + self.out(o)
        return x + self.mlp(self.norm2(x))


class LanguageModel(nn.Module):
    def __init__(self, attention):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.position = nn.Parameter(torch.randn(SEQ, D_MODEL) / math.sqrt(D_MODEL))
        self.blocks = nn.ModuleList(Block(attention) for _ in range(LAYERS))
        self.head = nn.Linear(D_MODEL, VOCAB)

    def forward(self, tokens):
        x = self.embed(tokens) + self.position[:tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def attnc_attention(q, k, v):
    return attnc.torch.attention(q.contiguous(), k.contiguous(), v.contiguous(), spec=SPEC)


def torch_attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def batches(seed):
    """Random arithmetic sequences: each starts anywhere and steps by 1, 2 or 3 (mod VOCAB), so
    the next token takes the last one and the step, which only the earlier tokens show."""
    generator = torch.Generator().manual_seed(seed)
    positions = torch.arange(SEQ)
    for _ in range(STEPS):
        start = torch.randint(0, VOCAB, (BATCH, 1), generator=generator)
        step = torch.randint(1, 4, (BATCH, 1), generator=generator)
        yield (start + step * positions) % VOCAB


def train(attention, seed=0):
    """The loss at every step of Adam on next-token prediction."""
    torch.manual_seed(seed)
    model = LanguageModel(attention)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for tokens in batches(seed):
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def main():
    mine, theirs = train(attnc_attention), train(torch_attention)
    for step, (a, b) in enumerate(zip(mine, theirs)):
        print("step %2d  attnc %.5f  torch %.5f" % (step, a, b))
    return mine, theirs


if __name__ == "__main__":
    main()
