"""CUDA bundles from both backends: PTX for sm_80 and sm_90 for every covered case, checked
for structure and assembled by ptxas when it is installed; the runtime's refusal where there is
no GPU; and, where there is one, the numerics against the f64 reference."""
import ctypes
import glob
import math
import os
import re
import shutil
import subprocess
import unittest

from common import CliTestCase, attnc, needs_backends, verdicts, write_npy

TARGETS = ["cuda-sm_80", "cuda-sm_90"]
# The PTX architecture each backend writes for a target: Halide 14 stops at sm_86 (the driver
# compiles that PTX for sm_90).
PTX_ARCH = {"mlir": {"cuda-sm_80": "sm_80", "cuda-sm_90": "sm_90"},
            "halide": {"cuda-sm_80": "sm_80", "cuda-sm_90": "sm_86"}}

# The GPU coverage: sdpa, GQA, causal (both alignments), padding, window, LSE, head dims
# 64/128/256, the three dtypes, and the modifiers the CPU kernels share. f16 and bf16 run on
# tensor cores in the MLIR backend, f32 on its SIMT path.
CASES = [
    "heads=4 kv_heads=2 d_k=64 mask=causal lse=true",
    "heads=4 d_k=128 mask=padding+causal lse=true dtype=bf16",
    "heads=2 kv_heads=1 d_k=256 mask=causal causal_align=top_left dtype=f16",
    "heads=2 d_k=64 mask=window window_left=7 window_right=2 lse=true",
    "heads=2 d_k=32 alibi=true softcap=30 bias=true mask=tensor",
    "heads=4 kv_heads=1 d_k=64 mask=window window_left=20 window_right=3 lse=true dtype=f16",
    "heads=2 d_k=64 d_v=32 alibi=true softcap=30 bias=true mask=tensor+padding dtype=bf16",
    "heads=3 d_k=80 mask=causal lse=true dtype=f16 layout=bshd",
    # Expressions (docs/spec.md): a causal document mask read through aux summaries; a score_mod
    # with a table and a tanh cap over a speculative tree mask from packed bits.
    'heads=4 kv_heads=2 d_k=64 aux="q_doc:i32[B,Tq] kv_doc:i32[B,Tk]" lse=true '
    'mask_mod="q_doc[b, q_idx] == kv_doc[b, kv_idx] && kv_idx <= qpos"',
    'heads=2 d_k=64 aux="rel:f32[heads,257] tree:i32[Tq]" params="cap=30" dtype=f16 '
    'score_mod="cap * tanh(score / cap) + rel[h, clamp(kv_idx - qpos, -128, 128) + 128]" '
    'mask_mod="kv_idx < Tk - Tq || bit(tree[q_idx], kv_idx - (Tk - Tq))"',
    # floor, which the NVVM lowering expands without libdevice, at negative integers (a key 4,
    # 8, ... before the row's position).
    'heads=2 d_k=64 mask_mod="floor((kv_idx - qpos) / 4) >= -2"',
    # A mask reading 40 aux elements per key, whose tile classes Halide tables (inlined in the
    # block loop's predicate, they took minutes to compile).
    'heads=2 d_k=64 aux="t:i32[Tk]" mask_mod="kv_idx <= qpos && (%s)"'
    % " || ".join("t[clamp(kv_idx + %d, 0, Tk - 1)] == %d" % (i, i) for i in range(40)),
    # Sparsity patterns the MLIR backend compiles as expressions: a layout read through
    # block_layout (tensor cores), BigBird's Philox draws beside a strided pattern (SIMT).
    "heads=4 kv_heads=2 d_k=64 mask=causal+block_sparse block=64 lse=true dtype=bf16",
    "heads=2 d_k=64 mask=bigbird+strided block=64 random_blocks=2 seed=7 stride=5",
    # Dropout's Philox factor on the probabilities that weight V (tensor cores, SIMT).
    "heads=4 kv_heads=2 d_k=64 mask=causal dropout=0.1 seed=11 lse=true dtype=bf16",
    "heads=2 d_k=64 dropout=0.6 seed=11",
    # RoPE: the rotations as launches of their own before the attention's, into device
    # workspace (tensor cores, SIMT).
    "heads=4 kv_heads=2 d_k=64 mask=causal rope=true lse=true dtype=f16",
    "heads=2 d_k=64 rope=true rope_style=interleaved rope_dims=32 mask=causal",
    # The weights: a launch of their own after the attention's, recomputing the scores against
    # lse (in device workspace when the spec does not ask for it).
    "heads=4 kv_heads=2 d_k=64 mask=causal+padding weights=true dtype=f16",
    'heads=2 d_k=64 aux="doc:i32[B,Tk]" bias=true lse=true weights=true '
    'mask_mod="doc[b, kv_idx] == doc[b, clamp(q_idx, 0, Tk - 1)]"',
    # Attention sinks, folded in by the finalize and by the split-key merge (tensor cores), and
    # by the SIMT finalize, the weights reading the lse that counts them.
    "heads=4 kv_heads=2 d_k=64 mask=causal+padding sinks=true lse=true dtype=bf16",
    "heads=2 d_k=64 sinks=true lse=true weights=true",
    # KV caches: seq_lens read by the mask and the positions, pages through the block table
    # (Halide) or gathered into per-sequence buffers by a launch of their own (MLIR), int8
    # rows dequantised as they are read (Halide) or by that gather (MLIR).
    "heads=4 kv_heads=2 d_k=64 kv_cache=contiguous mask=causal lse=true dtype=f16",
    "heads=4 kv_heads=1 d_k=64 kv_cache=paged page_size=16 mask=causal lse=true dtype=f16",
    "heads=4 kv_heads=2 d_k=64 kv_cache=paged page_size=16 kv_dtype=int8 lse=true dtype=bf16",
    # fp8 E4M3 rows decoded from their bits by that gather (MLIR; Halide refuses them).
    "heads=4 kv_heads=2 d_k=64 kv_cache=paged page_size=16 page_layout=hnd kv_dtype=fp8_e4m3 "
    "mask=causal lse=true dtype=f16",
    "heads=4 kv_heads=1 d_k=64 kv_cache=contiguous kv_dtype=fp8_e4m3 lse=true",
    # RoPE over a cache: the queries rotated at each sequence's end (seq_lens), the keys not.
    "heads=4 kv_heads=2 d_k=64 kv_cache=paged page_size=16 rope=true mask=causal dtype=bf16",
    # A ragged batch: the kernel launched once per run of sequences with the same number of
    # rows, on device views of the packed rows.
    "heads=4 kv_heads=1 d_k=64 layout=bshd kv_cache=paged page_size=16 ragged_q=true "
    "mask=causal lse=true dtype=f16",
    # The variants whose operands products make (attn.matmul phases before the attention, and
    # W_O after mha's): for f16 and bf16 the products run on tensor cores (TF32), and so does
    # the attention where its head dims are multiples of 16 (mha's and Linformer's operands in
    # the spec's dtype, bilinear's in f16); else on the SIMT path in f32.
    "variant=mha heads=4 kv_heads=2 d_model=128 mask=causal pe=sinusoidal lse=true",
    "variant=mha heads=4 kv_heads=2 d_model=96 mask=padding pe=sinusoidal dtype=bf16",
    "variant=mha heads=4 kv_heads=2 d_model=128 mask=causal weights=true lse=true dtype=f16",
    "variant=bilinear heads=2 d_q=48 d_k=64 mask=padding dtype=f16",
    "variant=additive heads=4 kv_heads=2 d_q=48 d_k=64 d_attn=40 mask=causal weights=true",
    "variant=linformer heads=2 d_k=64 proj_len=32 mask=padding dropout=0.1 seed=3 dtype=bf16",
    # Linear attention: feature rows, the chunk products and the prefix over chunks, each a
    # launch of its own.
    "variant=linear heads=4 kv_heads=2 d_k=64 feature_map=elu1 mask=causal+padding weights=true",
    "variant=linear heads=4 d_k=64 feature_map=favor features=128 seed=1 mask=causal dtype=bf16",
    "variant=linear heads=2 d_k=32 feature_map=relu dtype=f16",
]

# The backward entry (backward=true): the MLIR backend's tensor-core kernels of dQ and of dK
# and dV, on odd shapes against the f64 reference's gradients where a GPU is: GQA and MQA,
# causal both ways, padding, a window, ALiBi and softcap (score_mod's derivative), dropout
# regenerated, sinks, RoPE taken back, a block-sparse layout, bshd, d 128 and 80, a bias's
# gradient, mha's projections (GQA with RoPE; the sinusoid, padding), and the gradients of
# tables (a relative position table through a clamp and slopes per head behind a softcap, GQA;
# a table read twice at one element and one read in a branch of where()).
BACKWARD_CASES = [
    "heads=4 kv_heads=2 d_k=64 mask=causal lse=true backward=true dtype=f16",
    "heads=2 d_k=128 mask=padding+causal causal_align=top_left lse=true backward=true dtype=bf16",
    "heads=4 kv_heads=1 d_k=64 mask=window window_left=20 window_right=3 alibi=true softcap=30 "
    "lse=true backward=true dtype=bf16",
    "heads=4 kv_heads=2 d_k=64 mask=causal dropout=0.1 seed=11 sinks=true lse=true "
    "backward=true dtype=bf16",
    "heads=4 kv_heads=2 d_k=64 mask=causal rope=true lse=true backward=true dtype=f16",
    "heads=4 kv_heads=2 d_k=64 mask=causal+block_sparse block=64 lse=true backward=true "
    "dtype=bf16",
    "heads=3 d_k=80 d_v=48 mask=causal lse=true backward=true dtype=f16 layout=bshd",
    "heads=4 kv_heads=2 d_k=64 mask=causal bias=true softcap=20 lse=true backward=true "
    "dtype=f16",
    "variant=mha heads=4 kv_heads=2 d_k=16 d_model=24 mask=causal rope=true lse=true "
    "backward=true dtype=f16",
    "variant=mha heads=2 d_k=32 d_model=40 pe=sinusoidal mask=padding lse=true backward=true "
    "dtype=bf16",
    'heads=2 d_k=64 aux="doc:i32[B,Tk]" lse=true backward=true dtype=f16 '
    'score_mod="score + 0.5 * abs(kv_idx - qpos) / Tk" '
    'mask_mod="doc[b, kv_idx] == doc[b, clamp(q_idx, 0, Tk - 1)]"',
    'heads=4 kv_heads=2 d_k=32 mask=causal aux="rel:f32[heads,257] slopes:f32[heads]" '
    'params="cap=30" score_mod="cap * tanh(score / cap) + rel[h, clamp(kv_idx - qpos, -128, 128) '
    '+ 128] - 0.1 * slopes[h] * abs(qpos - kv_idx)" lse=true backward=true dtype=f16',
    'heads=2 d_k=16 aux="t:f32[Tk] u:f32[2,3]" score_mod="where(score > 0, score * u[h, '
    'kv_idx % 3], score + t[kv_idx] * t[kv_idx])" lse=true backward=true dtype=bf16',
]
# A bias's gradient summed in place by the dQ kernel's blocks over the bias's own batch and
# heads, broadcast over the batch, the heads or both: (bias shape, spec), at batch 2, Tq 37 and
# Tk 53.
BACKWARD_BIAS_CASES = [
    ([1, 4, 37, 53], "heads=4 kv_heads=2 d_k=64 bias=true mask=causal lse=true backward=true "
                     "dtype=bf16"),
    ([2, 1, 37, 53], "heads=4 kv_heads=1 d_k=32 bias=true alibi=true mask=window window_left=9 "
                     "window_right=2 lse=true backward=true dtype=f16"),
    ([1, 1, 37, 53], "heads=2 d_k=16 bias=true sinks=true dropout=0.2 seed=3 lse=true "
                     "backward=true dtype=bf16"),
    # beside a table's gradient: the copies follow the bias's blocks
    ([2, 1, 37, 53], 'heads=2 d_k=16 bias=true aux="s:f32[heads]" score_mod="score + s[h]" '
                     "mask=causal lse=true backward=true dtype=f16"),
]

# The kernels of a backward case's PTX: the forward's 6 and the backward's 2, with RoPE 2
# rotations in each and 2 transposed ones in the backward, with sinks a task loop of their
# gradients; mha's forward adds its 4 products, and its backward recomputes the projections
# and the attention (3 + 6, and its 2 rotations), forms dO_a and grad_w_o (2) and the inputs'
# and weights' gradients (6); a task loop per table whose gradient score_mod takes sums its
# copies.
BACKWARD_SHAPES = [("2", "13", "29"), ("3", "17", "5"), ("1", "1", "40"), ("1", "70", "70")]


def backward_entries(spec):
    rope = "rope=true" in spec
    mha = variant_of(spec)[0] == "mha"
    forward = 6 + (2 if rope else 0) + (PRODUCTS["mha"] if mha else 0)
    projections = 3 + 6 + (2 if rope else 0) + 2 + 6 if mha else 0
    return forward, (2 + (4 if rope else 0) + (1 if "sinks=true" in spec else 0) + projections
                     + len(tables_read(spec)))


def tables_read(spec):
    """The f32 aux tensors that score_mod reads: the tables whose gradients the backward takes."""
    aux = re.search(r'aux="([^"]*)"', spec)
    score_mod = re.search(r'score_mod="([^"]*)"', spec)
    if not aux or not score_mod:
        return []
    names = [decl.split(":")[0] for decl in aux.group(1).split() if ":f32[" in decl]
    return [name for name in names if re.search(r"\b%s\[" % name, score_mod.group(1))]


# The instructions of the MLIR backend's tensor-core kernels (f16 and bf16 storage): the MMAs,
# their shared-memory operand loads and the asynchronous K/V copies, which no other kernel has,
# then the softmax's quad reductions and exponentials.
TENSOR_CORE = ["mma.sync.aligned.m16n8k16.row.col.f32", "ldmatrix.sync.aligned.m8n8.x4.shared",
               "ldmatrix.sync.aligned.m8n8.x4.trans.shared", "cp.async.cg.shared.global",
               "cp.async.wait_group"]
REGISTER_SOFTMAX = ["shfl.sync.bfly", "ex2.approx.ftz.f32"]
# The variants' products on tensor cores (f16 and bf16 specs): TF32 MMAs on operands rounded
# to TF32 as they are staged.
TF32_PRODUCTS = ["mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "cvt.rna.tf32.f32"]
# Halide's kernels and the tensor-core kernels stage K/V tiles (or the products' operand tiles)
# through shared memory, with barriers between the staging and its use (the MLIR SIMT path
# reads them through the caches).
SHARED_STAGING = [".shared", "bar.sync"]

# The attn.matmul launches of a variant whose attention runs on tensor cores.
PRODUCTS = {"mha": 4, "bilinear": 1, "linformer": 2}


def variant_of(spec):
    words = dict(w.split("=", 1) for w in spec.split() if "=" in w)
    return words.get("variant", "sdpa"), words


def attention_on_tensor_cores(spec):
    """Whether the MLIR backend's attention of an f16 or bf16 spec runs on tensor cores: sdpa,
    and the variants whose products make f16 or bf16 operands with head dims multiples of 16."""
    variant, words = variant_of(spec)
    if variant == "sdpa":
        return True
    if variant not in PRODUCTS or (variant == "bilinear" and "bf16" in spec):
        return False
    d_k = (int(words["d_k"]) if "d_k" in words
           else int(words["d_model"]) // int(words["heads"]))  # mha's default
    return d_k % 16 == 0 and int(words.get("d_v", d_k)) % 16 == 0


# Tq != Tk both ways, decode (Tq = 1 against a long Tk), batch > 1.
SHAPES = [("2", "13", "29"), ("3", "17", "5"), ("1", "1", "1000")]


def ptxas():
    return shutil.which("ptxas") or next(iter(glob.glob("/usr/local/cuda*/bin/ptxas")), None)


def gpu_available():
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0


@needs_backends("halide", "mlir")
class CudaBundles(CliTestCase):
    def compile(self, spec, target, backend="mlir"):
        out = os.path.join(self.tmp, backend + target + str(abs(hash(spec))))
        r = self.expect(attnc("compile", spec, "--backend", backend, "--target", target,
                              "--emit", "so,ptx", "-o", out), 0)
        files = r.stdout.split()
        self.assertEqual(sorted(os.path.splitext(f)[1] for f in files), [".ptx", ".so"])
        return [f for f in files if f.endswith(".so")][0], [f for f in files if f.endswith(".ptx")][0]

    def test_ptx_for_every_case_and_arch(self):
        assembler = ptxas()
        if not assembler:
            print("\nskip (part): ptxas not found; the PTX is checked for structure only")
        for backend, arches in PTX_ARCH.items():
            for spec, target in ((s, t) for s in CASES for t in TARGETS):
                with self.subTest(backend=backend, spec=spec, target=target):
                    # What the capability table says the backend does not build, it refuses.
                    refused = verdicts(spec, target)[backend]
                    if refused:
                        self.expect(attnc("compile", spec, "--backend", backend, "--target",
                                          target, "-o", os.path.join(self.tmp, "no")), 2,
                                    refused)
                        continue
                    _, ptx = self.compile(spec, target, backend)
                    with open(ptx) as f:
                        text = f.read()
                    arch = arches[target]
                    self.assertIn(".target " + arch, text)
                    self.assertIn(".entry", text)
                    # The dot products: FMAs, or only MMAs (linear attention's on tensor cores).
                    self.assertTrue("fma.rn.f32" in text or "mma.sync" in text)
                    self.assertNotIn(".extern", text)  # no libdevice or other external calls
                    half = backend == "mlir" and "f16" in spec
                    tensor_cores = half and attention_on_tensor_cores(spec)
                    tf32_products = half and "variant=" in spec
                    for instruction in SHARED_STAGING:
                        self.assertEqual(instruction in text,
                                         backend == "halide" or tensor_cores or tf32_products,
                                         instruction)
                    for instruction in TENSOR_CORE:
                        self.assertEqual(instruction in text, tensor_cores, instruction)
                    for instruction in TF32_PRODUCTS:
                        self.assertEqual(instruction in text, tf32_products, instruction)
                    if tensor_cores:
                        for instruction in REGISTER_SOFTMAX:
                            self.assertTrue(instruction in text, instruction)
                        element = "bf16" if "bf16" in spec else "f16"
                        mma = "m16n8k16.row.col.f32.%s.%s.f32" % (element, element)
                        self.assertTrue(mma in text, mma)
                        # The single-pass kernel, the split-key kernel and its merge, for decode
                        # steps (Tq <= 16, a GQA group's heads per tile) and for the rest, in
                        # one PTX module, after RoPE's rotations (the queries', and the keys' but
                        # over a cache) and before the weights'. A paged or quantized cache is
                        # gathered for the prefill branch (the decode tiles read pages and
                        # quantized rows themselves) and for the weights.
                        rotations = 0 if "rope=true" not in spec else 1 if "kv_cache" in spec else 2
                        weights = 1 if "weights=true" in spec else 0
                        cached = "kv_cache=paged" in spec or "kv_dtype" in spec
                        gather = cached * (1 + weights)
                        products = PRODUCTS.get(variant_of(spec)[0], 0)
                        self.assertEqual(text.count(".entry"),
                                         6 + rotations + gather + weights + products)
                    if assembler:
                        r = subprocess.run([assembler, "-arch=" + arch, ptx, "-o",
                                            ptx + ".cubin"], capture_output=True, text=True)
                        self.assertEqual(r.returncode, 0, r.stderr)

    def test_backward_ptx_assembles(self):
        assembler = ptxas()
        specs = BACKWARD_CASES + [spec for _, spec in BACKWARD_BIAS_CASES]
        for spec, target in ((s, t) for s in specs for t in TARGETS):
            with self.subTest(spec=spec, target=target):
                _, ptx = self.compile(spec, target)
                with open(ptx) as f:
                    text = f.read()
                forward, backward = backward_entries(spec)
                self.assertEqual(text.count(".entry attnc_mlir_backward_kernel"), backward)
                self.assertEqual(text.count(".entry"), forward + backward)
                for instruction in TENSOR_CORE + REGISTER_SOFTMAX:
                    self.assertIn(instruction, text)
                self.assertNotIn(".extern", text)
                self.assertNotIn("atom.", text)  # deterministic: no atomics
                if assembler:
                    r = subprocess.run([assembler, "-arch=" + PTX_ARCH["mlir"][target], ptx, "-o",
                                        ptx + ".cubin"], capture_output=True, text=True)
                    self.assertEqual(r.returncode, 0, r.stderr)
        # The SIMT path has no backward: f32, or head dims off the MMA's 16.
        for spec in ("heads=2 d_k=64 lse=true backward=true",
                     "heads=2 d_k=72 lse=true backward=true dtype=f16"):
            self.expect(attnc("compile", spec, "--backend", "mlir", "--target", "cuda-sm_80",
                              "-o", os.path.join(self.tmp, "no-backward")), 2,
                        "tensor cores")

    def test_manifest_and_explain_name_the_gpu(self):
        self.compile(CASES[0], "cuda-sm_90", "halide")  # both backends write CUDA bundles
        bundle, _ = self.compile(CASES[0], "cuda-sm_90")
        with open(bundle[:-3] + ".json") as f:
            text = f.read()
        self.assertIn('"device":"cuda"', text.replace(" ", ""))
        self.assertIn('"cuda_arch":"sm_90"', text.replace(" ", ""))
        r = self.expect(attnc("explain", CASES[0], "--target", "cuda-sm_90", "--stage", "gpu"), 0)
        self.assertIn("gpu.launch_func", r.stdout)
        self.assertIn("gpu.module", r.stdout)
        self.expect(attnc("compile", CASES[0], "--backend", "mlir", "--emit", "ptx", "-o",
                          os.path.join(self.tmp, "cpu-ptx")), 2, "--emit ptx needs a cuda target")
        out = os.path.join(self.tmp, "too-big")
        self.expect(attnc("compile", "heads=2 d_k=128", "--backend", "halide", "--target",
                          "cuda-sm_80", "--schedule", "key_block=256", "-o", out), 2,
                    "key_block=256 stages 262144 bytes of f32 keys and values in shared memory")
        self.assertFalse(os.path.exists(out))

    def test_runs_against_the_reference_or_says_why_not(self):
        if not gpu_available():
            bundle, _ = self.compile(CASES[0], "cuda-sm_90")
            self.expect(attnc("verify", bundle, "--batch", "1", "--seq-q", "4"), 1,
                        "runs on an NVIDIA GPU")
            self.skipTest("no NVIDIA GPU here: the runtime refuses CUDA bundles with the reason "
                          "(checked); the numerics run where a GPU is")
        for backend in PTX_ARCH:
            for spec in CASES:
                if verdicts(spec, "cuda-sm_80")[backend]:
                    continue  # refused, as test_ptx_for_every_case_and_arch checks
                bundle, _ = self.compile(spec, "cuda-sm_80", backend)
                for batch, tq, tk in SHAPES:
                    with self.subTest(backend=backend, spec=spec, shape=(batch, tq, tk)):
                        self.expect(attnc("verify", bundle, "--batch", batch, "--seq-q", tq,
                                          "--seq-k", tk, "--seed", tq), 0, "PASS")
        for spec in BACKWARD_CASES:
            bundle, _ = self.compile(spec, "cuda-sm_80")
            for batch, tq, tk in BACKWARD_SHAPES:
                with self.subTest(spec=spec, shape=(batch, tq, tk)):
                    self.expect(attnc("verify", bundle, "--backward", "--batch", batch,
                                      "--seq-q", tq, "--seq-k", tk, "--seed", tq), 0, "PASS")
        for i, (shape, spec) in enumerate(BACKWARD_BIAS_CASES):
            with self.subTest(spec=spec, bias=shape):
                bias = os.path.join(self.tmp, "bias%d.npy" % i)
                write_npy(bias, [math.sin(0.37 * e) for e in range(math.prod(shape))], shape)
                bundle, _ = self.compile(spec, "cuda-sm_80")
                self.expect(attnc("verify", bundle, "--backward", "--batch", "2", "--seq-q",
                                  "37", "--seq-k", "53", "--bias", bias), 0, "grad_bias", "PASS")


if __name__ == "__main__":
    unittest.main()
