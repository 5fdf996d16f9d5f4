"""scripts/bench-backward: the backward entry (attnc's MLIR kernel, `attnc bench --backward`)
against PyTorch's CPU flash SDPA backward (the peer torch-sdpa-backward: dq, dk and dv from a
random dL/do, the forward's graph kept, so each timed call is the backward alone).

The issue's shapes: B 1, T 2048, f32, H 8 with d 64 and 128, no mask and causal, at 1 thread;
and B H = 1 (d 64) at 2 threads, where PyTorch's kernel has one (batch, head) to share; then a
learnable bias, bf16 (the percentage of the f32 FMA peak still; the preamble gives the
vdpbf16ps peak beside it), and mha (d_model 512) against the same block in PyTorch eager (the
peer torch-mha-backward: matmuls, flash SDPA and W_O, autograd). attnc's mha runs with
save_projections, as its Python front trains it: its backward reads the forward's projections
and heads' output, as PyTorch's autograd keeps them. Each figure is the median over
separate processes, attnc's and the peer's alternated round by round (rounds.py), the limits
measured in the same run (machine.py); rates count FlashAttention's backward FLOPs, 2.5 times
the forward's 4 B H T^2 d (halved for causal), and for mha the four projections' backward,
dx and dW each as many FLOPs as the product: 16 B T d_model H d."""
import os
import statistics

import attnc
import tables
from rounds import arguments, cell, measure, preamble

# (heads, d, mask, threads, dtype); "bias": no mask, a learnable bias [1, H, T, T] whose
# gradient both compute (PyTorch on its math path: its CPU flash kernel has no bias gradient);
# bf16: attnc's recomputed products as vdpbf16ps pairs where the CPU has them, PyTorch's flash
# backward in bf16; "mha", "mha causal": variant=mha with d_model 512, the inputs' and the
# weights' gradients, the projections saved by the forward.
SHAPES = [(8, 64, "none", 1, "f32"), (8, 64, "causal", 1, "f32"), (8, 128, "none", 1, "f32"),
          (8, 128, "causal", 1, "f32"), (1, 64, "none", 2, "f32"), (1, 64, "causal", 2, "f32"),
          (8, 64, "bias", 1, "f32"), (8, 64, "none", 1, "bf16"), (8, 64, "causal", 1, "bf16"),
          (8, 128, "none", 1, "bf16"), (8, 64, "mha", 1, "f32"), (8, 64, "mha causal", 1, "f32")]
D_MODEL = 512
QUICK = SHAPES[:1] + SHAPES[4:5]
RUNS = 3


def key(shape, who):
    return "%s | %s" % ("h%d d%d %s %dt %s" % shape, who)


def spec(heads, d, mask, dtype):
    variant = ("mha d_model=%d save_projections=true" % D_MODEL if mask.startswith("mha")
               else "sdpa")
    text = "variant=%s heads=%d d_k=%d dtype=%s lse=true backward=true" % (variant, heads, d,
                                                                            dtype)
    return text + (" mask=causal" if mask.endswith("causal") else
                   " bias=true" if mask == "bias" else "")


def schedule(rounds, shapes, seq, work):
    for shape in shapes:
        heads, d, mask, threads, dtype = shape
        bundle = attnc.compile_bundle(spec(heads, d, mask, dtype),
                                      os.path.join(work, key(shape, "")))
        argv = attnc.bench_argv(bundle, seq, seq, threads, RUNS, extra=["--backward"])
        argv.remove("--no-baseline")  # the backward has no unfused baseline to skip
        rounds.attnc(key(shape, "attnc"), argv)
        mha = mask.startswith("mha")
        rounds.peer("torch-mha-backward" if mha else "torch-sdpa-backward", threads,
                    key(shape, "torch"),
                    {"heads": heads, "kv_heads": heads, "d": d, "d_model": D_MODEL, "tq": seq,
                     "tk": seq, "dtype": dtype,
                     "mask": "causal" if mask.endswith("causal") else "none",
                     "bias": mask == "bias", "runs": RUNS})


def gflops(shape, seq, samples):
    heads, d, mask, _, _ = shape
    flops = 2.5 * 4 * heads * seq * seq * d / (2 if mask.endswith("causal") else 1)
    if mask.startswith("mha"):
        flops += 16 * seq * D_MODEL * heads * d
    return flops / (statistics.median(samples) * 1e6)


def rows(rounds, shapes, seq, peak):
    for shape in shapes:
        ours, theirs = rounds.figure(key(shape, "attnc")), rounds.figure(key(shape, "torch"))
        threads = shape[3]
        rate = gflops(shape, seq, ours) if ours else None
        yield ["H %d, d %d, %s, %s" % (shape[:3] + shape[4:]), threads,
               cell(ours) if ours else "could not run: " + rounds.error(key(shape, "attnc")),
               "%.1f (%.0f%%)" % (rate, 100 * rate / (peak * threads)) if rate else "–",
               cell(theirs) if theirs else "could not run: " + rounds.error(key(shape, "torch")),
               "%.2fx" % (statistics.median(theirs) / statistics.median(ours))
               if ours and theirs else "–"]


def main():
    args = arguments(__doc__, "H 8 d 64 at 1 thread and B H = 1 at 2 threads", seq=True)
    shapes = QUICK if args.quick else SHAPES
    limits, rounds = measure(args, lambda rounds, work: schedule(rounds, shapes, args.seq, work))
    print(preamble(limits, rounds, "B 1, T %d" % args.seq))
    print("\n" + tables.markdown(
        ["shape", "threads", "attnc ms", "GFLOP/s (% of FMA peak)", "PyTorch backward ms",
         "attnc faster by"], rows(rounds, shapes, args.seq, limits["fma"])))
    print("\nmha: d_model %d; its peer is the block in PyTorch eager (torch-mha-backward)."
          % D_MODEL)


if __name__ == "__main__":
    main()
