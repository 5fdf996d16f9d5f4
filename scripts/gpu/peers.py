"""PyTorch's attentions at the bench rows of a gpu-kit's runs.json that name a peer: SDPA with
each of its CUDA backends forced (flash, cuDNN, memory-efficient) and FlexAttention (compiled,
a block mask for causal), timed as attnc bench times a GPU bundle: CUDA events, the L2 flushed
(by writing 512 MB) before each run, medians of 20 after 3 warm-ups; a read-bandwidth probe
(a sum over 2 GiB) first. TFLOP/s count a causal mask's half; GB/s are K/V bytes over time.
A backward row times torch.autograd.grad of q, k and v through the forward's graph (kept), the
backward alone, at 2.5 times the forward's FLOPs (FlashAttention's convention, as attnc bench).
  python3 peers.py runs.json"""
import json
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

device = "cuda"
flush = torch.empty(512 * 1024 * 1024, dtype=torch.uint8, device=device)


def median_ms(fn, runs=20, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def spec_keys(spec):
    return dict(item.split("=", 1) for item in spec.split())


def report(name, peer, ms, flops, kv_bytes, note=""):
    print("%-26s %-20s %9.4f ms %8.1f TFLOP/s %6.0f GB/s K/V%s"
          % (name, peer, ms, flops / ms / 1e9, kv_bytes / ms / 1e6, note), flush=True)


def timed(forward, q, k, v, backward):
    """What a row times: the forward, or the backward of one forward's graph (run once here)."""
    if not backward:
        return forward
    out = forward()
    grad = torch.randn_like(out)
    return lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)


def run(row, flex):
    keys = spec_keys(row["spec"])
    heads = int(keys["heads"])
    kv_heads = int(keys.get("kv_heads", heads))
    d = int(keys["d_k"])
    dtype = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[keys["dtype"]]
    causal = "causal" in keys.get("mask", "")
    b, tq, tk = row["batch"], row["seq_q"], row["seq_k"]
    backward = row.get("backward", False)
    q = torch.randn(b, heads, tq, d, device=device, dtype=dtype, requires_grad=backward)
    k = torch.randn(b, kv_heads, tk, d, device=device, dtype=dtype, requires_grad=backward)
    v = torch.randn(b, kv_heads, tk, d, device=device, dtype=dtype, requires_grad=backward)
    flops = (4 * b * heads * tq * tk * d * (0.5 if causal and tq == tk else 1)
             * (2.5 if backward else 1))
    kv_bytes = 2 * b * kv_heads * tk * d * q.element_size()
    gqa = heads != kv_heads
    for backend in ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION"):
        try:
            with sdpa_kernel(getattr(SDPBackend, backend)):
                def call():
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                          enable_gqa=gqa)
                report(row["name"], backend, median_ms(timed(call, q, k, v, backward)), flops,
                       kv_bytes)
        except RuntimeError as error:
            print("%-26s %-20s not run: %s" % (row["name"], backend, str(error).splitlines()[0]))
    if flex is None:
        return
    compiled, create_block_mask = flex
    # Bottom-right causal, as attnc's default alignment (the same as top-left when Tq = Tk).
    mask = (create_block_mask(lambda bi, h, qi, ki: qi + (tk - tq) >= ki, None, None, tq, tk,
                              device=device) if causal else None)
    try:
        call = timed(lambda: compiled(q, k, v, block_mask=mask, enable_gqa=gqa), q, k, v,
                     backward)
        report(row["name"], "FLEX", median_ms(call), flops, kv_bytes)
    except Exception as error:  # a compile failure of Inductor's, reported as the row's result
        print("%-26s %-20s not run: %s" % (row["name"], "FLEX", str(error).splitlines()[0]))


def main():
    rows = [r for r in json.load(open(sys.argv[1]))["bench"] if r["peer"]]
    print("device:", torch.cuda.get_device_name(), "torch", torch.__version__)
    x = torch.ones(1 << 30, dtype=torch.float16, device=device)
    ms = median_ms(lambda: x.sum(dtype=torch.float32), runs=10)
    print("read bandwidth: a sum over 2 GiB of f16 in %.3f ms, %.0f GB/s" % (ms, 2**31 / ms / 1e6))
    del x
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        flex = (torch.compile(flex_attention, dynamic=False), create_block_mask)
    except ImportError as error:
        flex = None
        print("FlexAttention: not run:", error)
    for row in rows:
        run(row, flex)


if __name__ == "__main__":
    main()
