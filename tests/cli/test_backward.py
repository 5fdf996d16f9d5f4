"""The MLIR backend's backward kernels against the f64 reference on odd shapes: Tq != Tk,
Tq = 1, sizes off every tile, fully masked rows, GQA, every mask, the modifiers and
expressions whose derivative the compiler takes, the gradients of float aux tensors and of a
bias (broadcast or not), sinks, dropout and RoPE, mha's projections, f16 and bf16, at 1 and 2
threads."""
import math
import os
import unittest

from common import CliTestCase, attnc, needs_backends, write_npy

BACKWARD = "lse=true backward=true "

# (spec, batch, Tq, Tk, lengths)
CASES = [
    ("heads=4 kv_heads=2 d_k=32 mask=causal", 2, 37, 53, None),
    ("heads=4 d_k=40 d_v=24 mask=causal softcap=20", 2, 37, 53, None),
    ("heads=4 kv_heads=1 d_k=7 alibi=true mask=window window_left=9 window_right=2", 2, 53, 37,
     None),
    ("heads=2 d_k=16 mask=padding", 3, 21, 33, "5,0,33"),
    ("heads=2 d_k=16 score_mod=score*0.5+tanh(score)-(q_idx-kv_idx)*0.01", 1, 19, 45, None),
    ("heads=2 d_k=16 mask_mod=(q_idx+kv_idx)%3!=0 causal_align=top_left mask=causal", 2, 45, 19,
     None),
    ("heads=2 d_k=32 score_mod=where(score>0,score,0.1*score)+abs(score)-max(score,1.0)", 1, 67,
     67, None),
    ("heads=2 d_k=32 mask=block_sparse block=16", 1, 67, 67, None),
    ("heads=2 d_k=32 mask=bigbird block=16 seed=3", 1, 67, 67, None),
    ("heads=2 d_k=32 mask=dilated dilation=2 window_left=8", 1, 67, 50, None),
    ("heads=2 d_k=32 mask=tensor", 2, 30, 50, None),
    ("heads=3 d_k=24 d_v=8 mask=causal", 1, 1, 77, None),
    ("heads=8 kv_heads=2 d_k=64 mask=causal layout=bshd", 1, 130, 130, None),
    ("heads=4 kv_heads=2 d_k=16 sinks=true mask=causal", 2, 37, 53, None),
    ("heads=2 d_k=16 sinks=true mask=padding", 3, 21, 33, "5,0,33"),
    ("heads=4 kv_heads=1 d_k=16 dropout=0.2 seed=7 mask=causal", 2, 37, 53, None),
    ("heads=2 d_k=24 dropout=0.3 seed=5 sinks=true softcap=10", 1, 1, 40, None),
    ("heads=4 kv_heads=2 d_k=32 dtype=bf16 mask=causal", 2, 37, 53, None),
    # bf16's dQ sums over pairs of keys from an odd first kept key (the window's) to an odd Tk.
    ("heads=4 kv_heads=2 d_k=32 dtype=bf16 mask=window+padding window_left=9 window_right=2", 3,
     37, 53, "53,0,41"),
    ("heads=2 d_k=16 dtype=f16 sinks=true mask=padding", 3, 21, 33, "5,0,33"),
    ("heads=4 kv_heads=2 d_k=16 rope=true mask=causal", 2, 37, 53, None),
    ("heads=2 d_k=24 rope=true rope_dims=16 rope_style=interleaved causal_align=top_left "
     "mask=causal dtype=bf16", 1, 45, 19, None),
    # The gradients of float aux tensors: a relative position table read through a clamp and
    # slopes per head behind a softcap (GQA); a table read twice at one element and one read in
    # a branch of where(); a tensor read only by mask_mod (gradient 0), beside sinks and dropout.
    ('heads=4 kv_heads=2 d_k=32 mask=causal aux="rel:f32[heads,257] slopes:f32[heads]" '
     'params="cap=30" score_mod="cap * tanh(score / cap) + rel[h, clamp(kv_idx - qpos, -128, '
     '128) + 128] - 0.1 * slopes[h] * abs(qpos - kv_idx)"', 2, 37, 53, None),
    ('heads=2 d_k=16 aux="t:f32[Tk] u:f32[2,3]" score_mod="where(score > 0, score * u[h, '
     'kv_idx % 3], score + t[kv_idx] * t[kv_idx])"', 1, 19, 45, None),
    ('heads=2 d_k=16 aux="keep:f32[Tk] s:f32[heads]" score_mod="score + s[h]" '
     'mask_mod="keep[kv_idx] > -1.5" sinks=true dropout=0.2 seed=3', 2, 21, 33, None),
    # mha: the projections recomputed and taken back (grad_q, grad_k and grad_v are the
    # inputs' gradients, beside grad_w_q ... grad_w_o), with the sinusoid at both alignments,
    # RoPE on the projected heads, d_model and T past the products' tiles (256), bf16 and f16.
    ("variant=mha heads=4 kv_heads=2 d_k=16 d_model=24 mask=causal", 2, 37, 53, None),
    ("variant=mha heads=3 d_k=8 d_v=12 d_model=20 pe=sinusoidal mask=causal", 2, 37, 53, None),
    ("variant=mha heads=2 d_k=16 d_model=32 pe=sinusoidal causal_align=top_left mask=causal", 1,
     45, 19, None),
    ("variant=mha heads=4 kv_heads=1 d_k=16 d_model=33 rope=true mask=padding", 3, 21, 33,
     "5,0,33"),
    ("variant=mha heads=2 d_k=16 d_model=16 dropout=0.2 seed=7 sinks=true", 1, 1, 40, None),
    ("variant=mha heads=2 d_k=16 d_model=24 bias=true softcap=20", 2, 37, 53, None),
    ("variant=mha heads=2 d_k=16 d_model=300 mask=causal", 2, 300, 300, None),
    ("variant=mha heads=4 kv_heads=2 d_k=32 d_model=48 dtype=bf16 mask=causal", 2, 37, 53, None),
    ("variant=mha heads=2 d_k=16 d_model=24 dtype=f16 mask=window window_left=5", 2, 37, 53,
     None),
    # save_projections: the forward's q_proj, k_proj, v_proj and o_heads (checked against the
    # reference's) read by the backward in place of its recomputation, under GQA, the sinusoid,
    # RoPE, padding with an empty row, Tq = 1 with dropout and sinks, and T past the tiles.
    ("variant=mha heads=4 kv_heads=2 d_k=16 d_model=24 pe=sinusoidal mask=causal "
     "save_projections=true", 2, 37, 53, None),
    ("variant=mha heads=4 kv_heads=1 d_k=16 d_model=33 rope=true mask=padding "
     "save_projections=true", 3, 21, 33, "5,0,33"),
    ("variant=mha heads=2 d_k=16 d_model=16 dropout=0.2 seed=7 sinks=true save_projections=true",
     1, 1, 40, None),
    ("variant=mha heads=2 d_k=16 d_model=300 mask=causal save_projections=true", 2, 300, 300,
     None),
    ("variant=mha heads=4 kv_heads=2 d_k=32 d_model=48 dtype=bf16 mask=causal "
     "save_projections=true", 2, 37, 53, None),
]


# A bias and its gradient in place, broadcast over the batch, the heads or both (one phase 2
# task per key chunk sums each column over the batch and heads in order): (bias shape, spec).
BIAS_CASES = [
    ([2, 4, 37, 53], "heads=4 kv_heads=2 d_k=32 bias=true mask=causal"),
    ([1, 4, 37, 53], "heads=4 kv_heads=2 d_k=32 bias=true softcap=20 "
                     "score_mod=score*0.5+tanh(score)"),
    ([2, 1, 37, 53], "heads=4 kv_heads=1 d_k=16 bias=true alibi=true mask=window "
                     "window_left=9 window_right=2"),
    ([1, 1, 37, 53], "heads=2 d_k=16 bias=true dtype=bf16 sinks=true dropout=0.2 seed=3"),
]


@needs_backends("mlir")
class MlirBackward(CliTestCase):
    def test_a_bias_gradient_broadcast_or_not(self):
        for i, (shape, spec) in enumerate(BIAS_CASES):
            with self.subTest(spec=spec, shape=shape):
                bias = os.path.join(self.tmp, "bias%d.npy" % i)
                count = shape[0] * shape[1] * shape[2] * shape[3]
                write_npy(bias, [math.sin(0.37 * e) for e in range(count)], shape)
                out = os.path.join(self.tmp, "bias%d" % i)
                self.expect(attnc("compile", BACKWARD + spec, "--backend", "mlir", "-o", out), 0)
                bundle = os.path.join(out, next(f for f in os.listdir(out) if f.endswith(".so")))
                for threads in ("1", "2"):
                    self.expect(attnc("verify", bundle, "--backward", "--threads", threads,
                                      "--batch", "2", "--seq-q", "37", "--seq-k", "53",
                                      "--bias", bias), 0, "grad_bias", "PASS")

    def test_every_gradient_matches_the_reference(self):
        for i, (spec, batch, tq, tk, lengths) in enumerate(CASES):
            with self.subTest(spec=spec):
                out = os.path.join(self.tmp, str(i))
                self.expect(attnc("compile", BACKWARD + spec, "--backend", "mlir", "-o", out), 0)
                bundle = os.path.join(out, next(f for f in os.listdir(out) if f.endswith(".so")))
                shape = ["--batch", str(batch), "--seq-q", str(tq), "--seq-k", str(tk)]
                if lengths:
                    shape += ["--lengths", lengths]
                for threads in ("1", "2"):
                    self.expect(attnc("verify", bundle, "--backward", "--threads", threads,
                                      *shape), 0, "grad_q", "grad_k", "grad_v", "PASS")

    def test_key_blocks_smaller_than_the_keys(self):
        # At these shapes the default key blocks give each of the 2 chunks of B H_kv = 4 one
        # block of 96 keys: blocks of 32 give a chunk several, dK's and dV's sums and a tile's
        # kept keys crossing blocks in a task, and a tail of 22 keys, with GQA's groups. A
        # bias's 8 chunk-major tasks take blocks of 32 keys either way (ceil(150 / 8) rounded).
        bias = os.path.join(self.tmp, "bias.npy")
        write_npy(bias, [math.sin(0.37 * e) for e in range(2 * 37 * 150)], [2, 1, 37, 150])
        for i, (spec, extra) in enumerate([
                ("heads=4 kv_heads=2 d_k=32 mask=causal", []),
                ("heads=2 d_k=16 mask=window window_left=9 alibi=true sinks=true", []),
                ("heads=4 kv_heads=1 d_k=16 bias=true", ["--bias", bias])]):
            with self.subTest(spec=spec):
                out = os.path.join(self.tmp, "blocks%d" % i)
                self.expect(attnc("compile", BACKWARD + spec, "--backend", "mlir", "--schedule",
                                  "backward_key_block=32", "-o", out), 0)
                bundle = os.path.join(out, next(f for f in os.listdir(out) if f.endswith(".so")))
                for threads in ("1", "2"):
                    self.expect(attnc("verify", bundle, "--backward", "--threads", threads,
                                      "--batch", "2", "--seq-q", "37", "--seq-k", "150", *extra),
                                0, "grad_q", "grad_k", "grad_v", "PASS")

    def test_saved_projections_replace_the_backward_recomputation(self):
        # The backward's module under save_projections: no attention recomputed and only the
        # eight products taking the projections back (dO_a, dW_O, and dx and dW for q, k, v),
        # where the recomputing backward also projects q, k and v again and runs the attention.
        def backward_ops(spec):
            out = os.path.join(self.tmp, "emit%d" % len(os.listdir(self.tmp)))
            self.expect(attnc("compile", BACKWARD + spec, "--backend", "mlir", "--emit", "mlir",
                              "-o", out), 0)
            with open(os.path.join(out, os.listdir(out)[0])) as emitted:
                text = emitted.read()
            backward = text.split("func.func @attnc_mlir_backward")[1].split("func.func @")[0]
            return backward.count("attn.matmul"), backward.count("attn.attention")

        spec = "variant=mha heads=4 kv_heads=2 d_k=16 d_model=24 mask=causal"
        self.assertEqual(backward_ops(spec + " save_projections=true"), (8, 0))
        self.assertEqual(backward_ops(spec), (11, 1))
        self.expect(attnc("compile", BACKWARD + "heads=2 d_k=16 save_projections=true", "-o",
                          self.tmp), 2, "save_projections needs variant=mha")
        self.expect(attnc("compile", BACKWARD + "variant=mha heads=2 d_k=16 d_model=32 "
                          "dtype=bf16 save_projections=true", "--target", "cuda-sm_80", "-o",
                          self.tmp), 2, "does not support save_projections=true on cuda")

    def test_a_fat_bundle_runs_the_backward_of_the_target_it_picks(self):
        out = os.path.join(self.tmp, "fat")
        self.expect(attnc("compile", BACKWARD + "heads=4 kv_heads=2 d_k=32 mask=causal",
                          "--backend", "mlir", "--target", "host,x86-64-avx2", "-o", out), 0)
        bundle = os.path.join(out, next(f for f in os.listdir(out) if f.endswith(".so")))
        self.expect(attnc("verify", bundle, "--backward", "--batch", "2", "--seq-q", "37",
                          "--seq-k", "53"), 0, "grad_q", "grad_k", "grad_v", "PASS")

    def test_auto_picks_the_mlir_kernel_and_names_what_it_leaves_out(self):
        r = self.expect(attnc("compile", BACKWARD + "heads=2 d_k=16 mask=causal", "-o", self.tmp),
                        0)
        self.assertIn("_mlir.so", r.stdout)
        self.expect(attnc("compile", "variant=additive lse=true backward=true heads=2 d_q=16 "
                          "d_k=16 d_attn=8", "-o", self.tmp), 2,
                    "the mlir backend does not support variant=additive on cpu targets (the "
                    "backward kernel", "--backend reference builds every spec")
        r = self.expect(attnc("compile", BACKWARD + "heads=2 d_k=16 aux=t:f32[Tk] "
                              "score_mod=score+t[kv_idx]", "-o", self.tmp), 0)
        self.assertIn("_mlir.so", r.stdout)


if __name__ == "__main__":
    unittest.main()
