"""The numerics matrix: every backend x variant/mask/modifier x odd shapes x dtypes, each
bundle checked by `attnc verify` against the f64 reference. Every registered backend (`attnc
backends`) is checked; new variants join by being added to the lists below. What a backend
covers is its rows of the capability table: a spec it does not cover must be refused with exit 2
and the table's reason, which the test checks too, so nothing is skipped silently."""
import itertools
import os
import unittest

from common import BUILT_BACKENDS, CliTestCase, attnc, needs_backends, verdicts, write_npy


# Sizes that are multiples of no tile: Tq != Tk both ways, decode (Tq = 1), batch > 1.
SHAPES = [("2", "13", "29"), ("3", "17", "5"), ("2", "1", "33")]

FEATURES = [
    "heads=4 kv_heads=2 d_k=32",
    "heads=4 kv_heads=1 d_k=80 d_v=48 mask=causal lse=true",
    "heads=3 d_k=32 mask=causal causal_align=top_left lse=true weights=true",
    "heads=3 d_k=32 mask=causal causal_align=top_left lse=true",
    "heads=2 d_k=16 mask=padding+causal lse=true",
    "heads=2 d_k=16 mask=causal+window window_left=4 lse=true",
    "heads=2 d_k=16 mask=window+global window_left=3 window_right=3 global_tokens=2",
    # Windows past every size: the whole row (distances, not positions, keep them in 32 bits).
    "heads=2 d_k=16 mask=window window_left=2147483647 window_right=2147483647 lse=true",
    "heads=2 d_k=16 mask=strided stride=4 lse=true",
    "heads=2 d_k=16 mask=dilated window_left=3 window_right=1 dilation=2",
    "heads=2 d_k=16 mask=block_sparse block=4 lse=true",
    "heads=2 d_k=16 mask=bigbird block=4 random_blocks=2 seed=9",
    "heads=2 d_k=16 mask=tensor lse=true",
    "heads=4 d_k=16 alibi=true mask=causal",
    "heads=2 d_k=16 softcap=20 bias=true",
    "heads=2 kv_heads=1 d_k=16 rope=true rope_style=interleaved rope_dims=8",
    "heads=2 d_k=16 dropout=0.3 seed=5 weights=true",
    "heads=2 kv_heads=1 d_k=16 mask=causal dropout=0.6 seed=5 lse=true",
    "heads=2 d_k=16 mask=padding dropout=0.5 seed=8",
    "heads=2 d_k=16 layout=bshd mask=causal",
    # Attention sinks: a logit per head in every denominator, rows with no kept key included.
    "heads=4 kv_heads=2 d_k=16 mask=padding+causal sinks=true lse=true weights=true",
    "variant=additive heads=2 d_q=6 d_k=10 d_v=4 d_attn=8 mask=causal sinks=true lse=true "
    "dtype=bf16",
    # KV caches (random seq_lens in [0, Tk], pages in shuffled order): each sequence's rows at
    # its end, with positions (causal, window, ALiBi) and written expressions read there.
    "heads=4 kv_heads=2 d_k=24 kv_cache=contiguous mask=causal lse=true sinks=true",
    "heads=8 kv_heads=1 d_k=40 kv_cache=paged page_size=16 mask=causal+window window_left=7 "
    "lse=true dtype=f16",
    "heads=2 d_k=16 kv_cache=paged page_size=5 alibi=true layout=bshd weights=true dtype=bf16",
    "heads=4 kv_heads=2 d_k=24 kv_cache=paged page_size=4 page_layout=hnd mask=causal lse=true",
    # int8 caches (k = k_scale k_int8 per position and KV head), dequantised by the reference
    # first.
    "heads=4 kv_heads=2 d_k=24 kv_cache=contiguous kv_dtype=int8 mask=causal lse=true "
    "dtype=f16",
    "heads=2 d_k=40 kv_cache=paged page_size=8 kv_dtype=int8 layout=bshd weights=true "
    "sinks=true",
    "heads=4 kv_heads=1 d_k=16 kv_cache=paged page_size=4 page_layout=hnd kv_dtype=int8 "
    "dtype=bf16 lse=true",
    'heads=4 kv_heads=2 d_k=16 kv_cache=contiguous aux="tree:i32[Tq]" '
    'mask_mod="kv_idx < Tk - Tq || bit(tree[q_idx], kv_idx - (Tk - Tq))" lse=true',
    "heads=2 d_k=32 dtype=f16 mask=causal lse=true",
    "heads=2 d_k=32 dtype=bf16 mask=causal",
    "variant=mha heads=2 d_k=8 pe=sinusoidal mask=causal lse=true",
    "variant=additive heads=2 d_q=6 d_k=10 d_v=4 d_attn=8 mask=padding weights=true",
    "variant=bilinear heads=2 d_q=6 d_k=10 mask=causal",
    "variant=linear d_k=16 feature_map=elu1 mask=causal weights=true",
    "variant=linear d_k=16 feature_map=relu mask=padding",
    "variant=linear heads=2 d_k=16 feature_map=favor features=32 seed=1",
    "variant=linformer heads=2 d_k=16 proj_len=8 mask=padding lse=true",
    "variant=mha heads=4 kv_heads=2 d_k=16 rope=true mask=causal weights=true dtype=f16",
    "variant=additive heads=4 kv_heads=2 d_k=32 mask=causal lse=true dtype=bf16",
    "variant=bilinear heads=3 d_q=40 d_k=24 mask=window window_left=3 weights=true alibi=true",
    "variant=linformer heads=2 kv_heads=1 d_k=16 proj_len=8 weights=true dropout=0.2 seed=3 "
    "layout=bshd",
    "variant=linear heads=4 kv_heads=2 d_k=24 d_v=40 feature_map=favor features=20 seed=1 "
    "mask=causal+padding causal_align=top_left weights=true dtype=bf16 layout=bshd",
    "variant=linear heads=4 kv_heads=1 d_k=24 feature_map=relu mask=causal+padding dtype=f16",
    # Expressions (docs/spec.md): the README's examples, and with other features around them.
    'heads=4 kv_heads=2 d_k=16 aux="q_doc:i32[B,Tq] kv_doc:i32[B,Tk]" '
    'mask_mod="q_doc[b, q_idx] == kv_doc[b, kv_idx] && kv_idx <= qpos" lse=true weights=true',
    'heads=2 d_k=16 aux="prefix:i32[B]" mask_mod="kv_idx <= qpos || kv_idx < prefix[b]"',
    'heads=2 d_k=16 aux="rel:f32[heads,257]" '
    'score_mod="score + rel[h, clamp(kv_idx - qpos, -128, 128) + 128]" mask=causal lse=true',
    'heads=2 d_k=16 scale=2 params="cap=5" score_mod="cap * tanh(score / cap)" lse=true',
    'heads=2 d_k=16 aux="tree:i32[Tq]" '
    'mask_mod="kv_idx < Tk - Tq || bit(tree[q_idx], kv_idx - (Tk - Tq))" lse=true',
    'variant=mha heads=2 d_k=8 mask=causal params="gain=0.5" '
    'score_mod="where((q_idx - kv_idx) % 3 == 0, score * gain, score - g)" dtype=f16',
    'variant=additive heads=2 d_k=8 mask=padding alibi=true '
    'mask_mod="kv_idx % 2 == 0 || abs(qpos - kv_idx) < 3" weights=true',
    'heads=4 kv_heads=2 d_k=16 softcap=20 bias=true dropout=0.2 seed=3 dtype=bf16 '
    'score_mod="sigmoid(score) * 4 + floor(sqrt(kv_idx + 0.5)) / (1 + h)" '
    'mask_mod="!(q_idx == 0 && b == 1) && max(kv_idx, q_idx) - min(kv_idx, q_idx) != 1"',
    # Huge scores: a constant shift softmax ignores, and rows whose every key scores -1e30 (the
    # first rows where Tq > Tk), which average v.
    'heads=2 d_k=16 score_mod="score - 1e20" lse=true',
    'heads=2 d_k=16 score_mod="where(kv_idx <= qpos, score, -1e30)" lse=true',
]

PRESETS = ["gpt2", "bert-base", "llama3-8b", "mistral-7b", "gemma2-9b", "falcon-7b",
           "bloom-560m", "t5-base", "longformer-base", "bigbird-base", "transformer-base",
           "luong-general", "linformer-base", "performer-base", "vit-b16", "mpt-7b",
           "llama3-70b", "rnnsearch"]


class NumericsMatrix(CliTestCase):
    def check(self, spec, shapes, backends=BUILT_BACKENDS):
        for backend in backends:
            with self.subTest(backend=backend, spec=spec):
                if backend not in BUILT_BACKENDS:
                    self.skipTest("attnc was built without the %s backend" % backend)
                out = self.tmp + "/" + backend
                reason = verdicts(spec)[backend]
                if reason:
                    self.expect(attnc("compile", spec, "--backend", backend, "-o", out), 2,
                                reason)
                    continue
                r = self.expect(attnc("compile", spec, "--backend", backend, "-o", out), 0)
                bundle = r.stdout.strip()
                # (B, Tq, Tk), or (B, Tq, Tk, lengths) for a padding mask's or a cache's.
                for batch, tq, tk, *lengths in shapes:
                    extra = ["--lengths", lengths[0]] if lengths else []
                    self.expect(attnc("verify", bundle, "--batch", batch, "--seq-q", tq,
                                      "--seq-k", tk, "--seed", tq, *extra), 0, "PASS")

    def test_features(self):
        for spec in FEATURES:
            self.check(spec, SHAPES)

    def test_head_dims_dtypes_and_sizes(self):
        # Every head dim the Halide and MLIR issues name x every dtype, with GQA and a causal mask, on
        # sizes that are multiples of no tile (sampled so the suite stays within minutes).
        sizes = [("1", "1", "7"), ("2", "7", "63"), ("1", "63", "129"), ("1", "129", "1000"),
                 ("1", "1000", "129")]
        case = 0
        for d in (32, 64, 80, 96, 128, 256):
            for dtype in ("f32", "bf16", "f16"):
                spec = "heads=4 kv_heads=2 d_k=%d mask=causal lse=true dtype=%s" % (d, dtype)
                self.check(spec, [sizes[case % len(sizes)], sizes[(case + 2) % len(sizes)]],
                           backends=["halide", "mlir"])
                case += 1

    @needs_backends("mlir")
    def test_decode_kernel(self):
        # The MLIR decode kernel (LowerDecode.cpp: a GQA group's heads and rows in one task,
        # keys split over tasks and merged), forced with decode=1 so every shape runs it: Tq 1,
        # 3 and 16 (rows per task 4 and 16: whole, partial and several tiles of them, the
        # group's tiles and the 8-row ones of tasks of 4 rows or more), key counts off
        # every block and split (512 keys per split: 1, 2 and 5 splits), ragged lengths with
        # 0 and 1, GQA ratios 1, 4 and 8, head dims off the vector width, every dtype, masks,
        # modifiers, expressions and dropout through the same terms as the prefill kernel,
        # sinks through the merge of the splits, and KV caches (pages of 16, 7 and 64 rows read
        # through the block table, int8 rows dequantised as they are read; lengths 0 and 1
        # among them).
        specs = [
            "heads=4 kv_heads=1 d_k=32 mask=causal+padding lse=true",
            "heads=8 kv_heads=1 d_k=40 d_v=24 mask=padding lse=true dtype=f16",
            "heads=2 d_k=24 mask=causal+window window_left=300 lse=true dtype=bf16",
            "heads=8 kv_heads=2 d_k=24 mask=padding sinks=true lse=true dtype=f16",
            "heads=8 kv_heads=2 d_k=32 kv_cache=contiguous mask=causal sinks=true lse=true",
            "heads=8 kv_heads=2 d_k=40 kv_cache=paged page_size=16 mask=causal lse=true "
            "dtype=f16",
            "heads=4 kv_heads=1 d_k=24 kv_cache=paged page_size=7 sinks=true weights=true",
            "heads=8 kv_heads=1 d_k=32 kv_cache=paged page_size=64 page_layout=hnd "
            "mask=causal lse=true dtype=bf16",
            "heads=8 kv_heads=2 d_k=40 kv_cache=paged page_size=16 kv_dtype=int8 mask=causal "
            "lse=true dtype=f16",
            "heads=4 d_k=24 kv_cache=contiguous kv_dtype=int8 layout=bshd weights=true",
            "heads=8 kv_heads=2 d_k=40 kv_cache=paged page_size=16 page_layout=hnd "
            "kv_dtype=fp8_e4m3 mask=causal sinks=true lse=true dtype=bf16",
            "heads=4 kv_heads=2 d_k=16 layout=bshd mask=padding softcap=20",
            "heads=2 d_k=16 mask=tensor+padding bias=true dropout=0.3 seed=5 lse=true",
            "heads=2 d_k=16 mask=bigbird block=16 random_blocks=2 seed=9 weights=true",
            'heads=4 kv_heads=2 d_k=16 aux="q_doc:i32[B,Tq] kv_doc:i32[B,Tk]" '
            'mask_mod="q_doc[b, q_idx] == kv_doc[b, kv_idx] && kv_idx <= qpos" lse=true',
        ]
        shapes = [("3", "1", "700", "0,1,700"), ("2", "3", "1100", "1100,517"),
                  ("2", "16", "2100", "2100,3"), ("1", "5", "1", "1"), ("2", "1", "29", "29,0")]
        for spec, schedule in itertools.product(specs, ["decode=1,decode_rows=4",
                                                       "decode=1,decode_rows=16"]):
            with self.subTest(spec=spec, schedule=schedule):
                out = self.tmp + "/decode"
                r = self.expect(attnc("compile", spec, "--backend", "mlir", "--schedule",
                                      schedule, "-o", out), 0)
                bundle = r.stdout.strip()
                for batch, tq, tk, lengths in shapes:
                    extra = (["--lengths", lengths]
                             if "padding" in spec or "kv_cache" in spec else [])
                    self.expect(attnc("verify", bundle, "--batch", batch, "--seq-q", tq,
                                      "--seq-k", tk, "--seed", tq, *extra), 0, "PASS")

    def test_kv_caches_on_every_backend(self):
        # KV caches on every backend whose rows cover them: Tq 1, 3 and 16 rows at each
        # sequence's end, lengths 0 and 1 among longer ones, pages of 16 and 64 rows in
        # shuffled order (attnc's random block tables), GQA ratios 1, 4 and 8, head dims off the
        # vector width, f16 and bf16 queries over f16, bf16, int8 and fp8 E4M3 caches (fp8 on
        # MLIR only: Halide refuses it), sinks.
        specs = [
            "heads=2 d_k=40 kv_cache=paged page_size=16 mask=causal sinks=true lse=true "
            "dtype=f16",
            "heads=8 kv_heads=2 d_k=24 kv_cache=paged page_size=64 page_layout=hnd mask=causal "
            "lse=true dtype=bf16",
            "heads=8 kv_heads=1 d_k=32 kv_cache=paged page_size=16 kv_dtype=int8 mask=causal "
            "sinks=true dtype=f16",
            "heads=4 kv_heads=1 d_k=24 kv_cache=contiguous kv_dtype=int8 mask=causal lse=true "
            "dtype=bf16",
            "heads=8 kv_heads=2 d_k=40 kv_cache=paged page_size=16 kv_dtype=fp8_e4m3 "
            "mask=causal sinks=true lse=true dtype=f16",
            "heads=4 kv_heads=1 d_k=24 kv_cache=contiguous kv_dtype=fp8_e4m3 layout=bshd "
            "mask=causal lse=true dtype=bf16",
        ]
        shapes = [("3", "1", "700", "0,1,700"), ("2", "3", "130", "130,1"),
                  ("3", "16", "200", "17,0,200")]
        for spec in specs:
            self.check(spec, shapes)

    def test_ragged_batches_on_every_backend(self):
        # Ragged queries (ragged_q): each sequence's own rows of the packed q and o, drawn so a
        # batch mixes a sequence of Tq rows with ones of 0, 1 and a few, at the end of caches of
        # ragged lengths (0 and 1 among them); with Tq = 20 one call runs the MLIR decode kernel
        # for its short sequences and the prefill kernel for its long ones.
        specs = [
            "heads=4 kv_heads=1 d_k=40 layout=bshd kv_cache=paged page_size=16 ragged_q=true "
            "mask=causal sinks=true lse=true dtype=f16",
            "heads=8 kv_heads=2 d_k=24 layout=bshd kv_cache=contiguous kv_dtype=int8 "
            "ragged_q=true mask=causal+window window_left=9 lse=true dtype=bf16",
        ]
        shapes = [("4", "20", "130", "130,1,0,77"), ("3", "1", "300", "0,1,300"),
                  ("2", "3", "64", "64,2")]
        for spec in specs:
            self.check(spec, shapes)

    def test_rope_over_kv_caches(self):
        # RoPE with a cache: the queries rotate at their positions at each sequence's end (far
        # along it, past 4k), the cached keys are read as stored; both pairings, partial rotary
        # dims, GQA, an int8 cache and a ragged batch.
        specs = [
            "heads=4 kv_heads=2 d_k=40 rope=true mask=causal lse=true kv_cache=contiguous",
            "heads=8 kv_heads=2 d_k=64 rope=true rope_style=interleaved rope_dims=32 "
            "rope_theta=500000 mask=causal lse=true kv_cache=paged page_size=16 dtype=f16",
            "heads=4 kv_heads=1 d_k=32 rope=true mask=causal lse=true layout=bshd "
            "kv_cache=paged page_size=64 page_layout=hnd kv_dtype=int8 ragged_q=true dtype=bf16",
        ]
        shapes = [("3", "1", "4500", "0,1,4500"), ("2", "20", "130", "130,33")]
        for spec in specs:
            self.check(spec, shapes)

    def test_new_rows_written_into_kv_caches(self):
        # kv_append: the runtime writes k_new and v_new at the query rows' positions (rotated by
        # RoPE, quantised for int8 and fp8) and the kernel then reads them from the cache; the reference
        # computes with the rows as written. Contiguous both layouts, paged both page orders, a
        # ragged batch, Tq 1 and 20 (decode and prefill kernels).
        specs = [
            "heads=4 kv_heads=2 d_k=40 mask=causal lse=true kv_cache=contiguous kv_append=true",
            "heads=8 kv_heads=2 d_k=64 rope=true rope_style=interleaved rope_dims=32 mask=causal "
            "kv_cache=paged page_size=16 dtype=f16 kv_append=true",
            "heads=4 kv_heads=1 d_k=32 rope=true mask=causal layout=bshd kv_cache=paged "
            "page_size=16 page_layout=hnd kv_dtype=int8 ragged_q=true lse=true kv_append=true",
            "heads=4 kv_heads=2 d_k=24 mask=causal layout=bshd kv_cache=contiguous kv_dtype=int8 "
            "dtype=bf16 kv_append=true",
            "heads=8 kv_heads=2 d_k=40 rope=true mask=causal layout=bshd kv_cache=paged "
            "page_size=16 kv_dtype=fp8_e4m3 ragged_q=true lse=true dtype=f16 kv_append=true",
        ]
        for spec in specs:
            self.check(spec, [("3", "1", "300"), ("2", "20", "100")])
        if "mlir" in BUILT_BACKENDS:  # the runtime writes host caches only
            self.expect(attnc("compile", specs[0], "--backend", "mlir", "--target", "cuda-sm_80",
                              "-o", self.tmp + "/gpu"),
                        2, "does not support kv_append on cuda targets")

    @needs_backends("mlir")
    def test_fp8_caches_decode_every_kind_of_byte(self):
        # Every E4M3 byte the kernels can meet: zero keys (so each row's output is the mean of
        # its values) and values holding the 16 subnormals (+-m 2^-9), the smallest normals,
        # +-448 and ordinary numbers, with a scale of 512 that makes the subnormals 0..7: a
        # subnormal decoded wrong moves the mean by units, far past the tolerance. Then a NaN
        # byte, which makes every row keeping it NaN. Decode (Tq 1) and prefill (Tq 3) kernels,
        # contiguous bhsd and paged nhd.
        d, tk = 16, 16
        value_bytes = list(range(0x00, 0x08)) + list(range(0x80, 0x88)) + [0x08, 0x88, 0x7E,
                                                                           0xFE, 0x38, 0xB8]
        values = [value_bytes[(j * 5 + e) % len(value_bytes)] for j in range(tk)
                  for e in range(d)]
        with_nan = list(values)
        with_nan[3 * d + 2] = 0xFF
        for cache in ("kv_cache=contiguous", "kv_cache=paged page_size=16"):
            spec = "heads=2 kv_heads=1 d_k=%d kv_dtype=fp8_e4m3 lse=true %s" % (d, cache)
            bundle = self.expect(attnc("compile", spec, "--backend", "mlir", "-o",
                                       self.tmp + "/fp8"), 0).stdout.strip()
            rows = "k_pages" if "paged" in cache else "k"
            shape = [1, tk, 1, d] if "paged" in cache else [1, 1, tk, d]
            scales = shape[:-1]
            paths = {}
            for name, data in (("zeros", [0] * (tk * d)), ("values", values),
                               ("with_nan", with_nan)):
                paths[name] = "%s/%s.npy" % (self.tmp, name)
                write_npy(paths[name], data, shape, "|u1")
            write_npy(self.tmp + "/ks.npy", [1.0] * tk, scales)
            write_npy(self.tmp + "/vs.npy", [512.0] * tk, scales)
            for v in ("values", "with_nan"):
                for tq in ("1", "3"):
                    with self.subTest(cache=cache, v=v, tq=tq):
                        params = ["--param", rows + "=" + paths["zeros"],
                                  "--param", rows.replace("k", "v", 1) + "=" + paths[v],
                                  "--param", "k_scale=" + self.tmp + "/ks.npy",
                                  "--param", "v_scale=" + self.tmp + "/vs.npy"]
                        self.expect(attnc("verify", bundle, "--seq-q", tq, "--seq-k", str(tk),
                                          "--lengths", str(tk), *params), 0, "PASS")

    def test_ragged_offsets_from_a_file_are_checked(self):
        spec = "heads=2 d_k=8 layout=bshd kv_cache=contiguous ragged_q=true mask=causal"
        bundle = self.expect(attnc("compile", spec, "--backend", "reference", "-o", self.tmp), 0)
        bundle = bundle.stdout.strip()
        offsets = self.tmp + "/cu.npy"
        write_npy(offsets, [0, 3, 3, 5], [4], "<i4")
        self.expect(attnc("verify", bundle, "--seq-k", "9", "--param",
                          "cu_seqlens_q=" + offsets), 0, "B=3 total_q=5", "PASS")
        write_npy(offsets, [0, 3, 2, 5], [4], "<i4")
        self.expect(attnc("run", bundle, "--seq-k", "9", "--param", "cu_seqlens_q=" + offsets),
                    2, "cu_seqlens_q[2] = 2 is less than cu_seqlens_q[1] = 3")
        write_npy(offsets, [0, 0, 0, 0], [4], "<i4")
        self.expect(attnc("run", bundle, "--seq-k", "9", "--param", "cu_seqlens_q=" + offsets),
                    2, "cu_seqlens_q ends at 0", "at least one query row")

    def test_weights_with_empty_and_ragged_rows(self):
        # The weights recompute every score against the row's lse (in the MLIR kernels, a pass
        # of their own after the attention's): a batch whose length is 0 keeps nothing (weights
        # 0), ragged lengths and windows cut the keys that get a score, and every modifier,
        # mask and expression applies again, on tile-odd shapes with Tq = 1 and Tq > Tk (where
        # a bottom-right causal mask leaves the first rows nothing to keep).
        specs = [
            "heads=4 kv_heads=1 d_k=16 mask=causal+padding weights=true",
            "heads=4 kv_heads=2 d_k=16 mask=padding+window window_left=5 window_right=2 "
            "bias=true alibi=true weights=true layout=bshd",
            "heads=2 d_k=32 mask=padding+tensor+strided stride=3 softcap=10 rope=true "
            "weights=true lse=true dtype=bf16",
            'heads=2 d_k=16 mask=padding+causal causal_align=top_left params="gain=0.5" '
            'score_mod="score * gain - kv_idx / 8" mask_mod="kv_idx % 3 != 1" weights=true '
            'dtype=f16',
        ]
        for spec, backend in ((s, b) for s in specs for b in BUILT_BACKENDS):
            with self.subTest(spec=spec, backend=backend):
                self.assertIsNone(verdicts(spec)[backend])
                r = self.expect(attnc("compile", spec, "--backend", backend, "-o",
                                      self.tmp + "/" + backend), 0)
                for batch, tq, tk, lengths in [("3", "13", "29", "0,29,11"),
                                               ("2", "1", "40", "17,0"), ("2", "33", "5", "5,2")]:
                    self.expect(attnc("verify", r.stdout.strip(), "--batch", batch, "--seq-q", tq,
                                      "--seq-k", tk, "--lengths", lengths), 0, "weights ", "PASS")

    def test_rope_far_along_the_sequence(self):
        # Positions in the thousands (angles formed and reduced in f64 before f32's cos and
        # sin), Tq != Tk both ways and Tq = 1, both alignments, both pairings, partial rotary
        # dims, GQA, low precision and the BSHD layout.
        shapes = [("1", "37", "3001"), ("2", "1", "4097"), ("1", "300", "70")]
        for spec in ["heads=4 kv_heads=2 d_k=64 rope=true mask=causal lse=true",
                     "heads=2 d_k=32 rope=true rope_style=interleaved rope_dims=16 "
                     "rope_theta=500000 causal_align=top_left dtype=bf16 layout=bshd",
                     "heads=3 kv_heads=1 d_k=80 rope=true rope_dims=64 mask=padding+causal "
                     "alibi=true dtype=f16"]:
            self.check(spec, shapes, backends=["halide", "mlir"])

    def test_additive_hidden_rows_past_the_exponentials_bound(self):
        # The MLIR kernels form tanh(a + b) from E(a) E(b), E = e^2x, where the query tile's and
        # the key block's hidden rows lie within |x| <= 40 (AdditiveKeys.h), and tanh itself
        # elsewhere: a = 100 + u and b = -100 + u' (u, u' in [-1, 1)) lie far past the bound while
        # tanh(a + b) is anything but +-1, so a kernel that clamped them would score every pair 0.
        tq, tk = 37, 45
        spread = lambda n, shift, step: [shift + ((i * step) % 200 - 100) / 100.0 for i in range(n)]
        inputs = {"q": (spread(tq, 100, 37), [1, 1, tq, 1]), "k": (spread(tk, -100, 53), [1, 1, tk, 1]),
                  "w1": ([1.0], [1, 1, 1]), "w2": ([1.0], [1, 1, 1]), "v_a": ([3.0], [1, 1])}
        paths = {}
        for name, (values, shape) in inputs.items():
            paths[name] = os.path.join(self.tmp, name + ".npy")
            write_npy(paths[name], values, shape)
        spec = "variant=additive d_q=1 d_k=1 d_v=1 d_attn=1 lse=true weights=true"
        for backend in [b for b in ("halide", "mlir") if b in BUILT_BACKENDS]:
            with self.subTest(backend=backend):
                bundle = self.expect(attnc("compile", spec, "--backend", backend, "-o",
                                           os.path.join(self.tmp, backend)), 0).stdout.strip()
                self.expect(attnc("verify", bundle, "--q", paths["q"], "--k", paths["k"],
                                  *[a for n in ("w1", "w2", "v_a")
                                    for a in ("--param", "%s=%s" % (n, paths[n]))]), 0, "PASS")

    def test_linear_chunks_heads_and_alignment(self):
        # The MLIR kernel splits causal linear attention into the keys every row sees (the head
        # state P_0: j < Tk - Tq with bottom_right) and keys aligned with the query rows in
        # chunks of 64 (LinearAttention.cpp): shapes spanning several chunks, none a multiple
        # of one; Tq > Tk (rows that see nothing), Tq = 1 (all keys but one in the head); lengths
        # shorter than the head, zero, and past the aligned keys.
        for spec in [
            "variant=linear heads=4 kv_heads=2 d_k=16 d_v=8 feature_map=elu1 mask=causal+padding "
            "weights=true",
            "variant=linear heads=2 d_k=8 feature_map=favor features=24 seed=2 mask=causal "
            "causal_align=top_left dtype=bf16",
            "variant=linear heads=3 kv_heads=1 d_k=12 feature_map=relu mask=causal layout=bshd "
            "dtype=f16",
        ]:
            shapes = [("1", "130", "200", "150"), ("2", "200", "70", "0,61"),
                      ("2", "1", "129", "128,3"), ("1", "65", "65", "65")]
            if "padding" not in spec:
                shapes = [s[:3] for s in shapes]
            self.check(spec, shapes, backends=["halide", "mlir"])

    def test_sparse_patterns_on_long_sequences(self):
        # Long enough for many tiles per residue class (strided, dilated: gathered key tiles) and
        # many pattern blocks (BigBird, block-sparse: tiles aligned to them), none a multiple of
        # a tile, a class length or a block.
        for spec in [
            "heads=4 kv_heads=2 d_k=16 mask=causal+strided stride=7 causal_align=bottom_right "
            "lse=true",
            "heads=2 d_k=16 mask=padding+dilated window_left=9 window_right=2 dilation=3 dtype=f16",
            "heads=2 d_k=16 mask=strided stride=16 dropout=0.2 seed=4 alibi=true",
            "variant=additive heads=2 d_k=8 mask=causal+dilated window_left=20 dilation=4 "
            "weights=true",
            "variant=mha heads=2 d_model=32 mask=strided stride=5",
            "heads=2 d_k=16 mask=bigbird block=32 random_blocks=2 seed=3 lse=true",
            "heads=2 kv_heads=1 d_k=16 mask=causal+block_sparse block=64 lse=true",
        ]:
            self.check(spec, [("1", "300", "517"), ("2", "129", "64")])

    def test_expression_masks_on_structured_inputs(self):
        # Masks whose key blocks the kernels rule out from the expression's bounds over each
        # block (written causal, a band, block-diagonal; the MLIR kernels also trim a block's
        # keys after the last live chunk) and, in Halide's, through summaries of aux tensors
        # (documents: sorted runs of ragged length, a query document absent from the keys, so
        # whole rows are masked; a shifted and a float read), on long sequences that are
        # multiples of no tile, so every kind of block (dead, partial, edge) occurs.
        def documents(count, length, seed):
            # Ragged runs: run r has length 7 + (r * seed) % 61; ids rise, skipping some.
            ids, run = [], 0
            while len(ids) < length:
                ids += [2 * run + (run % 3 == 1)] * (7 + (run * seed) % 61)
                run += 1
            return ids[:length] * count

        specs = [
            'heads=2 d_k=16 mask_mod="kv_idx <= qpos" lse=true',
            'heads=2 kv_heads=1 d_k=16 mask_mod="abs(qpos - kv_idx) <= 40 && kv_idx % 5 != 2"',
            'heads=2 d_k=16 mask_mod="floor(kv_idx / 64) == floor(q_idx / 64) || kv_idx < 3"',
            'heads=2 d_k=16 aux="q_doc:i32[B,Tq] kv_doc:i32[B,Tk]" '
            'mask_mod="q_doc[b, q_idx] == kv_doc[b, kv_idx]" lse=true',
            'heads=2 d_k=16 aux="q_doc:i32[B,Tq] kv_doc:i32[B,Tk]" causal_align=top_left '
            'mask_mod="q_doc[b, q_idx] == kv_doc[b, clamp(kv_idx + 3, 0, Tk - 1)] && '
            'kv_idx <= qpos" lse=true',
            'heads=2 d_k=16 mask=window+global window_left=20 window_right=5 global_tokens=3 '
            'mask_mod="kv_idx % 7 != 3"',
            'heads=2 d_k=16 aux="q_doc:i32[B,Tq] kv_doc:i32[B,Tk] gate:f32[Tk]" '
            'mask_mod="q_doc[b, q_idx] <= kv_doc[b, kv_idx] + 1 && gate[kv_idx] > -1.5"',
            # A block table: whole blocks kept (the MLIR kernels then skip the region), dead,
            # or cut by a table entry's edge.
            'heads=2 d_k=16 aux="layout:i32[12,12]" '
            'mask_mod="layout[min(q_idx // 48, 11), min(kv_idx // 48, 11)] != 0"',
            # A read spanning more elements than the MLIR kernels scan per chunk (16 keys x 512):
            # its range is the whole int range, whose negation must not wrap into an empty one.
            'heads=2 d_k=16 aux="t:i32[Tk,512]" mask_mod="-(t[kv_idx, (q_idx * 7) % 512]) >= -3"',
            # Random blocks drawn with philox(): per pair of blocks (a draw reading the keys), and
            # one key block per query block (a draw reading none, which the Halide kernels table
            # once per call and classify tiles by).
            'heads=2 d_k=16 seed=5 mask_mod="kv_idx <= qpos && (q_idx // 32 == kv_idx // 32 || '
            'philox(q_idx // 32, kv_idx // 32, h, 0, 1) % 3 == 0)"',
            'heads=2 kv_heads=1 d_k=16 seed=7 lse=true mask_mod="kv_idx // 32 == q_idx // 32 || '
            'kv_idx // 32 == philox(0, q_idx // 32, h, 0, 2) % 10"',
            # The built-in masks as one mask_mod: the key range from causal, the window and the
            # lengths, the tensor mask elementwise (never scanned).
            'heads=2 kv_heads=1 d_k=16 mask=causal+padding+tensor+window window_left=100 '
            'window_right=7 causal_align=top_left lse=true',
        ]
        layout = [int(c <= r or (r + c) % 5 == 0) for r in range(12) for c in range(12)]
        write_npy(self.tmp + "/layout.npy", layout, [12, 12], "<i4")
        for spec, backend in ((s, b) for s in specs for b in BUILT_BACKENDS if b != "reference"):
            with self.subTest(spec=spec, backend=backend):
                self.assertIsNone(verdicts(spec)[backend])  # both code generators cover these
                r = self.expect(attnc("compile", spec, "--backend", backend, "-o",
                                      self.tmp + "/" + backend), 0)
                bundle = r.stdout.strip()
                for batch, tq, tk in [(2, 300, 517), (1, 129, 64), (2, 1, 700)]:
                    files = ["--param", "layout=" + self.tmp + "/layout.npy"] \
                        if "layout" in spec else []
                    if "q_doc" in spec:
                        for name, length, seed in [("q_doc", tq, 5), ("kv_doc", tk, 11)]:
                            path = "%s/%s_%d.npy" % (self.tmp, name, length)
                            write_npy(path, documents(batch, length, seed), [batch, length],
                                      "<i4")
                            files += ["--param", name + "=" + path]
                    self.expect(attnc("verify", bundle, "--batch", str(batch), "--seq-q",
                                      str(tq), "--seq-k", str(tk), *files), 0, "PASS")

    def test_presets(self):
        for preset in PRESETS:
            self.check("preset=" + preset, [("1", "7", "19")])


if __name__ == "__main__":
    unittest.main()
