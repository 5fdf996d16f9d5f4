"""The bundles of scripts/gpu-kit: every case of tests/cli/test_gpu.py that a backend builds
for the target, and the GPU bench shapes, with the list of runs that run.sh verifies and times.
  python3 compile-bundles.py ATTNC DIR TARGET"""
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "cli"))
attnc_path, out, target = sys.argv[1:4]
os.environ["ATTNC"] = os.path.abspath(attnc_path)
from common import verdicts, write_npy  # noqa: E402  (reads ATTNC)
from test_gpu import (BACKWARD_BIAS_CASES, BACKWARD_CASES, BACKWARD_SHAPES, CASES,  # noqa: E402
                      SHAPES)

# The bench rows: prefill at B 2, H 16, T 4096 and a decode step at B 8, Tk 16384 (537 MB of
# f16 K/V). `peer` names the PyTorch attention a row is measured against (none for the caches:
# their K/V bytes are the plain row's).
PREFILL = {"batch": 2, "seq_q": 4096, "seq_k": 4096}
DECODE = {"batch": 8, "seq_q": 1, "seq_k": 16384}
BENCH = [
    ("prefill_bf16_causal", "heads=16 d_k=128 dtype=bf16 mask=causal", "mlir", PREFILL, True),
    ("prefill_bf16", "heads=16 d_k=128 dtype=bf16", "mlir", PREFILL, True),
    ("prefill_f16_causal", "heads=16 d_k=128 dtype=f16 mask=causal", "mlir", PREFILL, True),
    ("prefill_f16_causal_halide", "heads=16 d_k=128 dtype=f16 mask=causal", "halide", PREFILL,
     False),
    ("prefill_f16_d64", "heads=16 d_k=64 dtype=f16", "mlir", PREFILL, True),
    ("decode_gqa", "heads=32 kv_heads=8 d_k=128 dtype=f16", "mlir", DECODE, True),
    ("decode_gqa_contiguous", "heads=32 kv_heads=8 d_k=128 dtype=f16 kv_cache=contiguous",
     "mlir", DECODE, False),
    ("decode_gqa_paged", "heads=32 kv_heads=8 d_k=128 dtype=f16 kv_cache=paged page_size=16",
     "mlir", DECODE, False),
    ("decode_gqa_paged_int8", "heads=32 kv_heads=8 d_k=128 dtype=f16 kv_cache=paged "
     "page_size=16 kv_dtype=int8", "mlir", DECODE, False),
    ("decode_gqa_paged_fp8", "heads=32 kv_heads=8 d_k=128 dtype=f16 kv_cache=paged "
     "page_size=16 kv_dtype=fp8_e4m3", "mlir", DECODE, False),
    ("decode_mha_contiguous", "heads=8 d_k=128 dtype=f16 kv_cache=contiguous", "mlir", DECODE,
     False),
    ("decode_mha", "heads=8 d_k=128 dtype=f16", "mlir", DECODE, True),
    ("decode_gqa_contiguous_int8", "heads=32 kv_heads=8 d_k=128 dtype=f16 kv_cache=contiguous "
     "kv_dtype=int8", "mlir", DECODE, False),
    ("decode_odd", "heads=8 d_k=80 d_v=48 dtype=bf16 kv_cache=paged page_size=16 kv_dtype=int8 "
     "sinks=true lse=true", "mlir", DECODE, False),
]
# The backward entry (backward=true; the timed entry), against PyTorch's backward at the same
# shapes (peers.py times loss.backward() of SDPA's and FlexAttention's forward).
BENCH += [
    ("backward_bf16_causal", "heads=16 d_k=128 dtype=bf16 mask=causal lse=true backward=true",
     "mlir", PREFILL, True),
    ("backward_bf16", "heads=16 d_k=128 dtype=bf16 lse=true backward=true", "mlir", PREFILL,
     True),
    ("backward_f16_d64_causal", "heads=16 d_k=64 dtype=f16 mask=causal lse=true backward=true",
     "mlir", PREFILL, True),
]
# The decode tiles' schedule trials of docs/benchmarks.md ("GPU"), against the defaults (2
# warps, 32 keys, 16 for quantized rows, fill_blocks 512).
GQA_CONTIGUOUS = "heads=32 kv_heads=8 d_k=128 dtype=f16 kv_cache=contiguous"
BENCH += [
    ("trial_fill256", GQA_CONTIGUOUS, "mlir:fill_blocks=256", DECODE, False),
    ("trial_fill1024", GQA_CONTIGUOUS, "mlir:fill_blocks=1024", DECODE, False),
    ("trial_paged_fill1024", "heads=32 kv_heads=8 d_k=128 dtype=f16 kv_cache=paged page_size=16",
     "mlir:fill_blocks=1024", DECODE, False),
    ("trial_4warps", GQA_CONTIGUOUS, "mlir:decode_tile=64", DECODE, False),
    ("trial_1warp_16keys", GQA_CONTIGUOUS, "mlir:decode_tile=16,decode_key_block=16", DECODE,
     False),
    ("trial_1warp_64keys", GQA_CONTIGUOUS, "mlir:decode_tile=16,decode_key_block=64", DECODE,
     False),
    ("trial_int8_32keys", GQA_CONTIGUOUS + " kv_dtype=int8", "mlir:decode_key_block=32", DECODE,
     False),
]
# Small shapes the bench bundles are verified at (Tq = 1 and Tq > 1, ragged against tiles).
SMALL = {"prefill": [(1, 300, 517), (2, 64, 64)],
         "decode": [(2, 1, 3000), (3, 4, 777), (4, 16, 45), (2, 1, 1)]}


def compile_bundle(spec, backend, folder):
    """backend: a backend's name, or NAME:SCHEDULE for a schedule other than its default."""
    backend, _, schedule = backend.partition(":")
    r = subprocess.run([os.environ["ATTNC"], "compile", spec, "--backend", backend, "--target",
                        target, "-o", os.path.join(out, folder)] +
                       (["--schedule", schedule] if schedule else []),
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("gpu-kit: %s does not compile %r:\n%s" % (backend, spec, r.stderr))
    so = [f for f in r.stdout.split() if f.endswith(".so")][0]
    return os.path.relpath(so, out)


def is_backward(spec):
    return "backward=true" in spec.split()


verify, bench = [], []
for index, spec in enumerate(CASES):
    for backend, reason in sorted(verdicts(spec, target).items()):
        if reason or backend == "reference":
            continue
        so = compile_bundle(spec, backend, "cases/%s%02d" % (backend, index))
        verify += [{"bundle": so, "spec": spec, "shape": [int(x) for x in shape],
                    "seed": int(shape[1]), "backward": False} for shape in SHAPES]
# Each backward case verifies its forward and its backward entry (verify --backward).
for index, spec in enumerate(BACKWARD_CASES):
    so = compile_bundle(spec, "mlir", "backward/mlir%02d" % index)
    verify += [{"bundle": so, "spec": spec, "shape": [int(x) for x in shape],
                "seed": int(shape[1]), "backward": True} for shape in BACKWARD_SHAPES]
# A broadcast bias's gradient: the bias from a file of its shape, at batch 2, Tq 37, Tk 53.
for index, (bias_shape, spec) in enumerate(BACKWARD_BIAS_CASES):
    so = compile_bundle(spec, "mlir", "backward/bias%02d" % index)
    bias = "backward/bias%02d.npy" % index
    write_npy(os.path.join(out, bias), [math.sin(0.37 * e) for e in range(math.prod(bias_shape))],
              bias_shape)
    verify.append({"bundle": so, "spec": spec, "shape": [2, 37, 53], "seed": 37,
                   "backward": True, "bias": bias})
for name, spec, backend, shape, peer in BENCH:
    so = compile_bundle(spec, backend, "bench/" + name)
    verify += [{"bundle": so, "spec": spec, "shape": list(small), "seed": 1,
                "backward": is_backward(spec)}
               for small in SMALL["decode" if shape is DECODE else "prefill"]]
    bench.append({"name": name, "bundle": so, "spec": spec, "peer": peer,
                  "backward": is_backward(spec), **shape})
with open(os.path.join(out, "runs.json"), "w") as f:
    json.dump({"target": target, "verify": verify, "bench": bench}, f, indent=1)
print("%d verify runs, %d bench rows" % (len(verify), len(bench)))
