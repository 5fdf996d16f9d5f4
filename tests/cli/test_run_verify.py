"""attnc run and attnc verify: .npy in and out, random inputs, errors."""
import json
import math
import os
import subprocess
import unittest

from common import ATTNC, CliTestCase, attnc, needs_backends, read_npy, write_npy


def sdpa(q, k, v, heads, tq, tk, d):
    """Plain softmax attention on flat BHSD lists (B = 1), no mask."""
    out = []
    for h in range(heads):
        for i in range(tq):
            qi = q[(h * tq + i) * d:(h * tq + i + 1) * d]
            scores = [sum(a * b for a, b in zip(qi, k[(h * tk + j) * d:(h * tk + j + 1) * d]))
                      / math.sqrt(d) for j in range(tk)]
            m = max(scores)
            w = [math.exp(s - m) for s in scores]
            z = sum(w)
            for e in range(d):
                out.append(sum(w[j] * v[(h * tk + j) * d + e] for j in range(tk)) / z)
    return out


class RunCommand(CliTestCase):
    def test_random_inputs_print_the_time(self):
        bundle = self.compile("heads=2 d_k=16 mask=causal")
        self.expect(attnc("run", bundle, "--batch", "2", "--seq-q", "7", "--seq-k", "11",
                          "--repeat", "3"), 0, "B=2 Tq=7 Tk=11", "ms median of 3")

    def test_npy_in_and_out_match_a_hand_computation(self):
        heads, tq, tk, d = 2, 3, 5, 4
        q = [math.sin(0.3 * i) for i in range(heads * tq * d)]
        k = [math.cos(0.2 * i) for i in range(heads * tk * d)]
        v = [(i % 7) - 3.0 for i in range(heads * tk * d)]
        paths = {}
        for name, values, t in (("q", q, tq), ("k", k, tk), ("v", v, tk)):
            paths[name] = os.path.join(self.tmp, name + ".npy")
            write_npy(paths[name], values, [1, heads, t, d], descr="<f8")
        bundle = self.compile("heads=2 d_k=4 lse=true")
        out = os.path.join(self.tmp, "o.npy")
        lse = os.path.join(self.tmp, "lse.npy")
        self.expect(attnc("run", bundle, "--q", paths["q"], "--k", paths["k"], "--v", paths["v"],
                          "--out", out, "--lse", lse), 0, "B=1 Tq=3 Tk=5")
        descr, shape, got = read_npy(out)
        self.assertEqual((descr, shape), ("<f4", (1, 2, 3, 4)))
        # Inputs were rounded to f32 on the way in, so compare at f32 precision.
        for a, b in zip(got, sdpa(q, k, v, heads, tq, tk, d)):
            self.assertAlmostEqual(a, b, places=5)
        self.assertEqual(read_npy(lse)[1], (1, 2, 3))

    def test_bf16_output_is_written_as_f32(self):
        bundle = self.compile("heads=1 d_k=8 dtype=bf16")
        out = os.path.join(self.tmp, "o.npy")
        self.expect(attnc("run", bundle, "--seq-q", "4", "--out", out), 0)
        self.assertEqual(read_npy(out)[0], "<f4")

    def test_mha_takes_parameters_from_files(self):
        bundle = self.compile("variant=mha heads=2 d_k=2 d_model=4")
        identity = [1.0 if r == c else 0.0 for r in range(4) for c in range(4)]
        w = os.path.join(self.tmp, "w.npy")
        write_npy(w, identity, [4, 4])
        self.expect(attnc("verify", bundle, "--param", "w_q=" + w, "--param", "w_o=" + w,
                          "--seq-q", "3", "--seq-k", "6"), 0, "PASS")
        self.expect(attnc("run", bundle, "--param", "w_z=" + w), 2, "takes no input 'w_z'")
        self.expect(attnc("run", bundle, "--param", "w_q"), 2, "expected NAME=file.npy")

    def test_usage_errors_exit_2(self):
        bundle = self.compile("heads=2 d_k=4")
        q = os.path.join(self.tmp, "q.npy")
        write_npy(q, [0.0] * 2 * 3 * 4, [1, 2, 3, 4])
        self.expect(attnc("run", bundle, "--q", q, "--seq-q", "5"), 2, "--seq-q 5 disagrees")
        self.expect(attnc("run", bundle, "--lse", os.path.join(self.tmp, "l.npy")), 2,
                    "no tensor 'lse'")
        self.expect(attnc("run", bundle, "--lengths", "3"), 2, "no padding mask")
        self.expect(attnc("run", bundle, "--batch", "0"), 2, "must be at least 1")
        bad_v = os.path.join(self.tmp, "v.npy")
        write_npy(bad_v, [0.0] * 2 * 9 * 4, [1, 2, 9, 4])
        # k binds Tk = 3 first; the runtime then refuses v.
        self.expect(attnc("run", bundle, "--k", q, "--v", bad_v), 2,
                    "tensor 'v' has shape [1,2,9,4]")
        self.expect(attnc("run", bundle, "--q", os.path.join(self.tmp, "missing.npy")), 2,
                    "cannot open")

    def test_padding_lengths_from_the_command_line(self):
        bundle = self.compile("heads=1 d_k=4 mask=padding lse=true")
        lse = os.path.join(self.tmp, "lse.npy")
        self.expect(attnc("run", bundle, "--batch", "2", "--seq-q", "2", "--seq-k", "3",
                          "--lengths", "0,3", "--lse", lse), 0)
        values = read_npy(lse)[2]
        self.assertEqual(values[:2], [float("-inf")] * 2)  # batch 0: no key at all
        self.assertTrue(all(math.isfinite(x) for x in values[2:]))
        self.expect(attnc("run", bundle, "--batch", "2", "--lengths", "1"), 2, "gives 1 lengths")
        self.expect(attnc("run", bundle, "--lengths", "x"), 2, "'x' is not an integer in [0, Tk=")

    def test_a_bundle_in_the_current_directory(self):
        bundle = self.compile("heads=1 d_k=4")
        r = subprocess.run([ATTNC, "run", os.path.basename(bundle), "--seq-q", "3"],
                           cwd=os.path.dirname(bundle), capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_not_a_bundle_fails(self):
        path = os.path.join(self.tmp, "fake.so")
        with open(path, "w") as f:
            f.write("nope")
        self.expect(attnc("run", path), 1, "cannot load bundle")


class BenchCommand(CliTestCase):
    def test_reports_kernel_and_baseline_side_by_side(self):
        bundle = self.compile("heads=2 d_k=16 mask=causal")
        r = self.expect(attnc("bench", bundle, "--seq-q", "40", "--runs", "3", "--warmup", "1",
                              "--reference", "--json"), 0)
        report = json.loads(r.stdout)
        self.assertEqual(sorted(report["timings"]), ["kernel", "reference", "unfused"])
        self.assertEqual(report["runs"], 3)
        self.assertGreater(report["timings"]["kernel"]["median_ms"], 0)
        self.assertGreater(report["peak_rss_mib"], 0)
        text = self.expect(attnc("bench", bundle, "--seq-q", "40", "--runs", "2"), 0,
                           "kernel", "unfused", "GFLOP/s", "peak RSS").stdout
        self.assertIn("kernel is", text)

    def test_baseline_says_why_it_does_not_run(self):
        bundle = self.compile("variant=linear heads=2 d_k=16")
        self.expect(attnc("bench", bundle, "--seq-q", "20", "--runs", "1"), 0,
                    "the unfused baseline does not cover variant=linear; it covers")
        self.expect(attnc("bench", bundle, "--runs", "x"), 2)

    def test_baseline_evaluates_masks_modifiers_and_expressions(self):
        # The eager passes over the score matrix (EagerExpression.h) must compute what the
        # kernel does, for every built-in as its expression and for written ones: odd shapes,
        # Tq = 1, Tq > Tk, fully masked rows, GQA, ragged lengths.
        specs = ["heads=4 kv_heads=2 d_k=16 mask=causal+window window_left=5",
                 "heads=2 d_k=16 softcap=20 alibi=true mask=causal",
                 "heads=2 d_k=16 bias=true mask=tensor",
                 "heads=2 d_k=16 dropout=0.3 seed=3 mask=padding",
                 "heads=2 d_k=16 mask=bigbird block=4 random_blocks=1 seed=2",
                 "heads=2 d_k=16 mask=strided+global stride=3 global_tokens=2",
                 "heads=2 d_k=16 mask=block_sparse block=4",
                 "variant=additive heads=2 d_q=12 d_k=16 d_attn=8 softcap=3 mask=dilated "
                 "dilation=2 window_left=6 window_right=6",
                 'heads=2 d_k=16 params="cap=5" score_mod="cap * tanh(score / cap) + '
                 'where(q_idx % 2 == 0, 0.5, -0.25)" mask_mod="(kv_idx - q_idx) % 3 != 1 && '
                 'q_idx != 3"',
                 'aux="doc:i32[B,Tk]" heads=2 d_k=16 '
                 'mask_mod="doc[b, kv_idx] == doc[b, min(q_idx, Tk - 1)]"',
                 "heads=4 kv_heads=2 d_k=16 rope=true mask=causal",
                 "heads=2 d_k=16 rope=true rope_dims=8 rope_style=interleaved rope_theta=500",
                 "variant=mha heads=4 kv_heads=2 d_k=8 rope=true alibi=true mask=causal"]
        for n, spec in enumerate(specs):
            bundle = self.compile(spec, os.path.join(self.tmp, str(n)))
            for tq, tk in [(13, 29), (1, 29), (40, 7)]:
                with self.subTest(spec=spec, tq=tq, tk=tk):
                    r = self.expect(attnc("bench", bundle, "--batch", "2", "--seq-q", str(tq),
                                          "--seq-k", str(tk), "--runs", "1", "--json"), 0)
                    report = json.loads(r.stdout)
                    self.assertEqual(report["baseline"], "run")
                    self.assertLess(report["baseline_max_abs_diff"], 1e-4)


    def test_each_variant_baseline_computes_what_the_kernel_does(self):
        # The unfused forms (stored tanh tensor, projections, ...) must agree with the kernel,
        # or their timings compare nothing.
        for n, spec in enumerate(["variant=additive heads=2 kv_heads=1 d_q=12 d_k=16 d_attn=8 "
                                  "mask=padding",
                                  "variant=bilinear heads=2 d_q=12 d_k=16 mask=causal",
                                  "variant=linformer heads=2 d_k=16 proj_len=8 mask=padding",
                                  "variant=mha heads=4 kv_heads=2 d_k=8 pe=sinusoidal mask=causal",
                                  "heads=2 d_k=16 layout=bshd"]):
            with self.subTest(spec=spec):
                bundle = self.compile(spec, os.path.join(self.tmp, str(n)))
                r = self.expect(attnc("bench", bundle, "--batch", "2", "--seq-q", "13",
                                      "--seq-k", "29", "--runs", "1", "--json"), 0)
                report = json.loads(r.stdout)
                self.assertEqual(report["baseline"], "run")
                self.assertLess(report["baseline_max_abs_diff"], 1e-4)

    def test_mha_baseline_around_an_sdpa_bundle(self):
        mha = self.compile("variant=mha heads=4 kv_heads=2 d_k=8 mask=causal",
                           os.path.join(self.tmp, "mha"))
        sdpa = self.compile("heads=4 kv_heads=2 d_k=8 mask=causal layout=bshd",
                            os.path.join(self.tmp, "sdpa"))
        r = self.expect(attnc("bench", mha, "--seq-q", "21", "--runs", "1", "--json",
                              "--attention", sdpa), 0)
        report = json.loads(r.stdout)
        self.assertIn("OpenBLAS GEMMs around", report["timings"]["unfused"]["what"])
        self.assertLess(report["baseline_max_abs_diff"], 1e-4)
        wrong = self.compile("heads=4 kv_heads=2 d_k=8 mask=causal",
                             os.path.join(self.tmp, "bhsd"))
        self.expect(attnc("bench", mha, "--seq-q", "21", "--runs", "1", "--attention", wrong), 2,
                    "--attention", "layout=bshd")

    def test_against_another_spec_on_a_subset_of_the_tensors(self):
        linear = self.compile("variant=linear heads=2 d_k=16 feature_map=favor features=8 seed=1",
                              os.path.join(self.tmp, "linear"))
        sdpa = self.compile("heads=2 d_k=16", os.path.join(self.tmp, "sdpa"))
        r = self.expect(attnc("bench", linear, "--seq-q", "30", "--runs", "1", "--json",
                              "--against", sdpa), 0)
        report = json.loads(r.stdout)
        self.assertIn("variant=sdpa", report["timings"]["against"]["what"])
        self.assertNotIn("mask_density", report)
        # sdpa's tensors do not include linear attention's omega: refused, naming both specs.
        self.expect(attnc("bench", sdpa, "--seq-q", "30", "--runs", "1", "--against", linear), 2,
                    "takes tensors this call", "variant=linear")

    def test_mask_density(self):
        bundle = self.compile("heads=1 d_k=8 mask=causal causal_align=top_left")
        r = self.expect(attnc("bench", bundle, "--seq-q", "10", "--runs", "1", "--json",
                              "--mask-density"), 0)
        self.assertAlmostEqual(json.loads(r.stdout)["mask_density"], 55 / 100)
        self.expect(attnc("bench", bundle, "--seq-q", "10", "--runs", "1", "--no-baseline",
                          "--attention", bundle), 2, "--attention", "has no use")


class VerifyCommand(CliTestCase):
    def test_gqa_causal_with_odd_sizes_passes(self):
        bundle = self.compile("variant=sdpa heads=8 kv_heads=2 d_k=64 mask=causal")
        for tq, tk in (("37", "53"), ("53", "37"), ("1", "129")):
            r = self.expect(attnc("verify", bundle, "--batch", "3", "--seq-q", tq, "--seq-k", tk),
                            0, "PASS", "max abs err")
            self.assertIn("Tq=%s Tk=%s" % (tq, tk), r.stdout)

    def test_reports_every_output(self):
        bundle = self.compile("heads=2 d_k=8 mask=padding lse=true weights=true")
        self.expect(attnc("verify", bundle, "--batch", "4", "--seq-q", "5"), 0,
                    "o ", "lse ", "weights ", "PASS")


class VerifyBackward(CliTestCase):
    def test_every_gradient_of_each_variant_passes(self):
        cases = {
            "heads=4 kv_heads=2 d_k=8 mask=causal bias=true sinks=true dropout=0.1 seed=2":
                ("grad_q", "grad_k", "grad_v", "grad_bias", "grad_sinks"),
            "heads=2 d_k=8 aux=\"rel:f32[heads,9]\" "
            "score_mod=\"score + rel[h, clamp(kv_idx - qpos, -4, 4) + 4]\" layout=bshd":
                ("grad_rel",),
            "variant=mha heads=2 d_k=8 pe=sinusoidal rope=true": ("grad_w_q", "grad_w_o"),
            "variant=bilinear heads=2 d_q=6 d_k=8": ("grad_w",),
            "variant=additive heads=2 d_k=8 d_attn=5": ("grad_w1", "grad_w2", "grad_v_a"),
            "variant=linformer heads=2 d_k=8 proj_len=7 mask=padding": ("grad_e", "grad_f"),
        }
        for spec, gradients in cases.items():
            with self.subTest(spec=spec):
                bundle = self.compile(spec + " lse=true backward=true",
                                      os.path.join(self.tmp, str(len(gradients)) + spec[:9]))
                self.expect(attnc("verify", bundle, "--backward", "--batch", "2", "--seq-q", "13",
                                  "--seq-k", "29"), 0, "backward, kernel", *gradients)
        bundle = self.compile("variant=linear heads=2 d_k=8 mask=causal backward=true",
                              os.path.join(self.tmp, "linear"))
        self.expect(attnc("verify", bundle, "--backward", "--seq-q", "1", "--seq-k", "9"), 0,
                    "grad_q", "grad_k", "grad_v", "PASS")

    def test_a_broadcast_bias_gets_a_gradient_of_its_own_shape(self):
        bias = os.path.join(self.tmp, "bias.npy")
        write_npy(bias, [math.sin(i) for i in range(2 * 5 * 7)], [1, 2, 5, 7])
        bundle = self.compile("heads=2 d_k=8 bias=true lse=true backward=true")
        self.expect(attnc("verify", bundle, "--backward", "--batch", "3", "--seq-q", "5",
                          "--seq-k", "7", "--bias", bias), 0, "grad_bias", "PASS")

    def test_manifest_lists_the_backward_arguments(self):
        bundle = self.compile("heads=2 d_k=8 sinks=true lse=true backward=true")
        with open(bundle[:-3] + ".json") as f:
            manifest = json.load(f)
        self.assertEqual([a["name"] for a in manifest["arguments"]],
                         ["q", "k", "v", "sinks", "o", "lse"])
        self.assertEqual([(a["name"], a["role"]) for a in manifest["backward"]["arguments"]],
                         [("q", "input"), ("k", "input"), ("v", "input"), ("sinks", "param"),
                          ("o", "input"), ("lse", "input"), ("grad_o", "input"),
                          ("grad_q", "output"), ("grad_k", "output"), ("grad_v", "output"),
                          ("grad_sinks", "output")])

    def test_bench_times_the_backward_entry(self):
        bundle = self.compile("heads=2 d_k=8 mask=causal lse=true backward=true")
        r = self.expect(attnc("bench", bundle, "--backward", "--reference", "--runs", "2",
                              "--seq-q", "33", "--json"), 0)
        report = json.loads(r.stdout)
        self.assertEqual(report["entry"], "backward")
        self.assertIn("no backward", report["baseline"])
        self.assertEqual(set(report["timings"]), {"kernel", "reference"})
        self.expect(attnc("bench", self.compile("heads=2 d_k=8", os.path.join(self.tmp, "f")),
                          "--backward"), 2, "has no backward entry")

    def test_refusals_name_what_is_wrong(self):
        bundle = self.compile("heads=2 d_k=8 lse=true")
        self.expect(attnc("verify", bundle, "--backward"), 2,
                    "has no backward entry; compile its spec with backward=true")
        self.expect(attnc("compile", "heads=2 d_k=8 backward=true", "--backend", "reference",
                          "-o", self.tmp), 2, "add lse=true")
        self.expect(attnc("compile", "heads=2 d_k=8 kv_cache=contiguous lse=true backward=true",
                          "--backend", "reference", "-o", self.tmp), 2,
                    "backward=true does not apply here")

    @needs_backends("mlir")
    def test_the_mlir_backend_names_what_its_backward_leaves_out(self):
        self.expect(attnc("compile", "variant=linformer heads=2 d_k=8 proj_len=8 lse=true "
                          "backward=true", "--backend", "mlir", "-o", self.tmp), 2,
                    "does not support variant=linformer on cpu targets (the backward kernel "
                    "covers sdpa and mha")
        self.expect(attnc("compile", "variant=bilinear heads=2 d_k=8 lse=true backward=true",
                          "--backend", "mlir", "-o", self.tmp), 2,
                    "does not support variant=bilinear")

if __name__ == "__main__":
    unittest.main()
