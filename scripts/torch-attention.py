#!/usr/bin/env python3
"""PyTorch's CPU attention written out as a peer for attnc bench: softmax(q k^T * scale
[+ causal -inf]) with F.dropout on the weights, then @ v, on [1, H, T, d] f32 tensors, the
unfused form users write when they need dropout or RoPE inside (FlashAttention's CPU kernel
takes neither); with --rope, q and k rotated first as LLaMA's reference code does (rotate_half,
cos/sin tables built once). Prints the median of RUNS timed runs in ms after two warm-up runs,
on all of the machine's threads. Runs in the peers' venv (scripts/python-env --peers prints its
Python):
  "$(scripts/python-env --peers)" scripts/torch-attention.py HEADS D T RUNS [--causal]
      [--dropout P] [--rope]
(docs/benchmarks.md's dropout and RoPE rows were measured with Debian's PyTorch 1.13)."""
import argparse
import os
import statistics
import time

import torch
import torch.nn.functional as F


def main():
    parser = argparse.ArgumentParser()
    for name in ("heads", "d", "t", "runs"):
        parser.add_argument(name, type=int)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--rope", action="store_true")
    a = parser.parse_args()
    torch.set_num_threads(os.cpu_count())
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, a.heads, a.t, a.d) for _ in range(3))
    blocked = torch.ones(a.t, a.t, dtype=torch.bool).triu(1) if a.causal else None
    # RoPE's tables: angle (t, i) = t * 10000^(-2i/d), repeated for the two halves.
    frequency = 10000.0 ** (-torch.arange(0, a.d, 2, dtype=torch.float32) / a.d)
    angles = torch.outer(torch.arange(a.t, dtype=torch.float32), frequency).repeat(1, 2)
    cos, sin = angles.cos(), angles.sin()

    def rotate(x):
        halves = torch.cat((-x[..., a.d // 2:], x[..., :a.d // 2]), dim=-1)
        return x * cos + halves * sin

    def attention():
        qr, kr = (rotate(q), rotate(k)) if a.rope else (q, k)
        scores = (qr @ kr.transpose(-1, -2)) * a.d ** -0.5
        if blocked is not None:
            scores = scores.masked_fill(blocked, float("-inf"))
        weights = F.dropout(scores.softmax(-1), p=a.dropout, training=a.dropout > 0)
        return weights @ v

    times = []
    with torch.no_grad():
        for run in range(a.runs + 2):
            start = time.perf_counter()
            attention()
            if run >= 2:
                times.append((time.perf_counter() - start) * 1e3)
    print("%.3f" % statistics.median(times))


if __name__ == "__main__":
    main()
