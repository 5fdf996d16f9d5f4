"""attnc compile: bundles, manifests, and no partial output on failure."""
import json
import os
import unittest

from common import BUILT_BACKENDS, CliTestCase, attnc, needs_backends


class CompileCommand(CliTestCase):
    def test_writes_a_bundle_and_its_manifest(self):
        bundle = self.compile("variant=sdpa heads=8 kv_heads=2 d_k=64 mask=causal")
        manifest_path = bundle[:-3] + ".json"
        with open(manifest_path) as f:
            manifest = json.load(f)
        self.assertEqual(manifest["abi_version"], 3)
        self.assertEqual(manifest["backend"], "reference")
        self.assertEqual(manifest["target"]["device"], "cpu")
        names = [a["name"] for a in manifest["arguments"]]
        self.assertEqual(names, ["q", "k", "v", "o"])
        self.assertEqual(manifest["arguments"][1]["shape"], ["B", 2, "Tk", 64])
        self.assertEqual(os.listdir(os.path.dirname(bundle)).__len__(), 2)

    def test_compiles_from_a_json_file(self):
        path = os.path.join(self.tmp, "spec.json")
        with open(path, "w") as f:
            json.dump({"variant": "sdpa", "heads": 2, "d_k": 16, "mask": ["causal", "padding"]}, f)
        self.compile(path)

    def test_bad_spec_backend_and_target_exit_2_without_output(self):
        out = os.path.join(self.tmp, "never")
        self.expect(attnc("compile", "d_k=0", "-o", out), 2, "d_k=0")
        self.expect(attnc("compile", "d_k=8", "--backend", "tpu", "-o", out), 2, "unknown backend")
        self.expect(attnc("compile", "d_k=8", "--target", "riscv", "-o", out), 2,
                    "--target riscv: not a target attnc knows; known: host x86-64-avx2")
        if "mlir" in BUILT_BACKENDS:
            self.expect(attnc("compile", "d_k=8 kv_cache=contiguous kv_append=true", "--backend",
                              "mlir", "--target", "cuda-sm_90", "-o", out),
                        2, "the mlir backend does not support kv_append on cuda targets")
        self.expect(attnc("compile", "d_k=8", "--backend", "reference", "--emit", "a", "-o", out),
                    2, "the reference backend writes bundles only")
        self.expect(attnc("compile", "d_k=8", "--backend", "reference",
                          "--emit", "pdf", "-o", out), 2,
                    "--emit pdf: not an artifact attnc writes; known: so, lib, a, h")
        self.expect(attnc("compile", "d_k=8", "--backend", "reference", "--target", "cuda-sm_90",
                          "-o", out), 2, "not a target of the reference backend; known: host")
        self.expect(attnc("compile", "d_k=8"), 2, "--out")
        self.assertFalse(os.path.exists(out))

    @needs_backends("halide")
    def test_halide_emits_aot_artifacts_and_cross_compiles(self):
        out = os.path.join(self.tmp, "aot")
        r = self.expect(attnc("compile", "heads=2 d_k=32 mask=causal", "--backend", "halide",
                              "--emit", "so,a,h,stmt,asm", "-o", out), 0)
        files = r.stdout.split()
        self.assertTrue(files[0].endswith("_halide.so"), files)
        for ext in (".a", ".h", ".stmt", ".s"):
            self.assertTrue(any(f.endswith(ext) for f in files), (ext, files))
        with open([f for f in files if f.endswith(".h")][0]) as f:
            self.assertIn("halide_buffer_t *_q_buffer", f.read())
        with open([f for f in files if f.endswith(".stmt")][0]) as f:
            self.assertIn("produce state", f.read())
        arm = os.path.join(self.tmp, "arm")
        r = self.expect(attnc("compile", "heads=2 d_k=32", "--backend", "halide", "--target",
                              "arm-64-linux", "--emit", "obj", "-o", arm), 0)
        with open(r.stdout.strip(), "rb") as f:
            header = f.read(20)
        self.assertEqual(header[:4], b"\x7fELF")
        self.assertEqual(int.from_bytes(header[18:20], "little"), 183)  # EM_AARCH64
        self.expect(attnc("compile", "heads=2 d_k=32", "--backend", "halide", "--target",
                          "arm-64-linux", "-o", os.path.join(self.tmp, "arm2")), 2,
                    "cross target")
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "arm2")))

    @needs_backends("mlir")
    def test_mlir_bundles_run_their_decode_kernel_for_short_queries(self):
        # The bundle holds the prefill kernel (Tq > 16) and the decode kernel (Tq <= 16, taken
        # only there); a --schedule compiles what it names alone.
        out = os.path.join(self.tmp, "both")
        spec = "heads=4 kv_heads=2 d_k=32 mask=causal lse=true"
        bundle = self.expect(attnc("compile", spec, "--backend", "mlir", "-o", out), 0).stdout.strip()
        self.assertTrue(bundle.endswith("_mlir.so"), bundle)
        with open(bundle[:-3] + ".json") as f:
            buckets = json.load(f)["schedule"]["shape_dispatch"]
        self.assertEqual([(b["seq_q"], b["only_inside"], b["schedule"]["params"]["decode"])
                          for b in buckets], [([17, 2 ** 63 - 1], False, 0), ([1, 16], True, 1)])
        trace = {"ATTNC_TRACE_DISPATCH": "1"}
        for tq, tk, kernel in ((1, 300, 1), (16, 5, 1), (17, 300, 0), (40, 3, 0)):
            r = self.expect(attnc("verify", bundle, "--batch", "2", "--seq-q", str(tq),
                                  "--seq-k", str(tk), env=trace), 0, "PASS")
            self.assertIn("Tq=%d Tk=%d runs kernel %d of 2" % (tq, tk, kernel), r.stderr)
        alone = os.path.join(self.tmp, "alone")
        bundle = self.expect(attnc("compile", spec, "--backend", "mlir", "--schedule", "decode=1",
                                   "-o", alone), 0).stdout.strip()
        with open(bundle[:-3] + ".json") as f:
            self.assertEqual(json.load(f)["schedule"]["params"]["decode"], 1)

    @needs_backends("halide")
    def test_halide_blocks_kept_whole_skip_the_elementwise_mask(self):
        # Causal: the mask is an update of `masked` over the block's keys, under a test of the
        # block hoisted out of its loop. The tensor mask, which no bound pins down, stays inline.
        def stmt(spec, name):
            r = self.expect(attnc("compile", spec, "--backend", "halide", "--emit", "stmt",
                                  "-o", os.path.join(self.tmp, name)), 0)
            with open(r.stdout.strip()) as f:
                return f.read()
        causal = stmt("heads=2 d_k=32 mask=causal", "causal")
        self.assertRegex(causal, r"if \(.*\) \{\n *(let .*\n *)*for \(masked\.s1\.masked_keys")
        self.assertNotIn("masked.s1", stmt("heads=2 d_k=32 mask=tensor", "tensor"))

    @needs_backends("halide")
    def test_halide_autoscheduler_schedules_the_algorithm(self):
        # Mullapudi2016 (the quickest of Halide 14's three to compile) schedules the whole
        # algorithm; the kernel is checked against the reference on an odd shape.
        out = os.path.join(self.tmp, "auto")
        r = self.expect(attnc("compile", "heads=2 d_k=32 mask=causal", "--backend", "halide",
                              "--schedule", "autoscheduler=3", "-o", out), 0)
        with open(os.path.join(out, os.path.basename(r.stdout.strip())[:-3] + ".json")) as f:
            self.assertEqual(json.load(f)["schedule"]["params"]["autoscheduler"], 3)
        self.expect(attnc("verify", r.stdout.strip(), "--batch", "2", "--seq-q", "37",
                          "--seq-k", "53"), 0, "PASS")
        # attnc's register-tile parameters mean nothing to an autoscheduler: refused.
        clash = os.path.join(self.tmp, "clash")
        self.expect(attnc("compile", "heads=2 d_k=32", "--backend", "halide", "--schedule",
                          "autoscheduler=1,row_unroll=2", "-o", clash), 2,
                    "row_unroll is a parameter of attnc's own schedule")
        self.assertFalse(os.path.exists(clash))

    @needs_backends("mlir")
    def test_mlir_emits_each_stage_and_cross_compiles(self):
        out = os.path.join(self.tmp, "mlir")
        r = self.expect(attnc("compile", "heads=2 d_k=32 mask=causal", "--backend", "mlir",
                              "--target", "x86-64-avx2", "--emit", "mlir,llvm,asm,obj", "-o", out),
                        0)
        files = r.stdout.split()
        self.assertEqual(sorted(os.path.splitext(f)[1] for f in files),
                         [".ll", ".mlir", ".o", ".s"])
        with open([f for f in files if f.endswith(".mlir")][0]) as f:
            self.assertIn("attn.attention", f.read())
        with open([f for f in files if f.endswith(".s")][0]) as f:
            asm = f.read()
        # AVX2: 8 query rows per ymm register, fused multiply-adds, no zmm.
        self.assertIn("vfmadd231ps\t%ymm", asm)
        self.assertNotIn("zmm", asm)
        arm = os.path.join(self.tmp, "mlir-arm")
        r = self.expect(attnc("compile", "heads=2 d_k=32", "--backend", "mlir", "--target",
                              "arm-64-linux", "--emit", "obj", "-o", arm), 0)
        with open(r.stdout.strip(), "rb") as f:
            self.assertEqual(int.from_bytes(f.read(20)[18:20], "little"), 183)  # EM_AARCH64
        self.expect(attnc("compile", "heads=2 d_k=32", "--backend", "mlir", "--emit", "stmt",
                          "-o", arm + "2"), 2, "the mlir backend writes so, mlir, llvm, asm, obj")

    @needs_backends("mlir")
    def test_explain_prints_every_stage(self):
        r = self.expect(attnc("explain", "heads=2 d_k=16 mask=causal lse=true"), 0)
        stages = [line.split()[3] for line in r.stdout.splitlines()
                  if line.startswith("// ----- stage")]
        self.assertEqual(stages, ["spec", "attn", "online", "tiled", "vector", "llvm"])
        for op in ("attn.attention", "attn.online_update", "scf.forall", "vector.fma",
                   "llvm.intr.fmuladd"):
            self.assertIn(op, r.stdout)
        r = self.expect(attnc("explain", "heads=2 d_k=16", "--stage", "tiled"), 0)
        self.assertIn("attn.pack_query", r.stdout)
        self.assertNotIn("stage online", r.stdout)
        self.expect(attnc("explain", "heads=2 d_k=16", "--stage", "lowered"), 2,
                    "unknown stage for target host; stages: spec, attn, online, tiled, vector, llvm")
        r = self.expect(attnc("explain", "heads=2 d_k=16", "--stage", "spec",
                              "--mlir-print-ir-after-all"), 0)
        self.assertIn("IR Dump After", r.stderr)

    @needs_backends("mlir")
    def test_key_range_reads_the_masks_constants(self):
        # The key loop of a query tile starts at the window's left edge (40 keys before the
        # first row) and ends 3 past the last row, and dilated's span bounds it too: constants
        # the tile classifier reads in the backend library itself (where a matcher that relied
        # on a trait's type id once read none of them, so every block from key 0 was visited).
        r = self.expect(attnc("explain", "heads=2 d_k=16 mask=window window_left=40 "
                              "window_right=3", "--stage", "tiled"), 0)
        self.assertRegex(r.stdout, r"arith\.addi %\w+, %c-40 : index")
        self.assertRegex(r.stdout, r"arith\.addi %\w+, %c3 : index")
        r = self.expect(attnc("explain", "heads=2 d_k=16 mask=dilated window_left=5 dilation=3",
                              "--stage", "tiled"), 0)
        self.assertRegex(r.stdout, r"arith\.addi %\w+, %c-15 : index")

    def test_link_failure_leaves_nothing_behind(self):
        fresh = os.path.join(self.tmp, "fresh")
        self.expect(attnc("compile", "d_k=8", "--backend", "reference",
                          "-o", fresh, env={"ATTNC_CXX": "false"}), 1,
                    "linking the bundle failed")
        self.assertFalse(os.path.exists(fresh))
        existing = os.path.join(self.tmp, "existing")
        os.makedirs(existing)
        with open(os.path.join(existing, "keep.txt"), "w") as f:
            f.write("mine")
        self.expect(attnc("compile", "d_k=8", "--backend", "reference",
                          "-o", existing, env={"ATTNC_CXX": "false"}), 1)
        self.assertEqual(os.listdir(existing), ["keep.txt"])

    def test_missing_linker_driver_is_named(self):
        out = os.path.join(self.tmp, "out")
        self.expect(attnc("compile", "d_k=8", "--backend", "reference",
                          "-o", out, env={"ATTNC_CXX": "/nonexistent/c++"}),
                    1, "cannot start /nonexistent/c++")
        self.assertFalse(os.path.exists(out))

    def test_output_path_that_is_a_file(self):
        path = os.path.join(self.tmp, "file")
        open(path, "w").close()
        self.expect(attnc("compile", "d_k=8", "--backend", "reference",
                          "-o", path), 2, "not a directory")


if __name__ == "__main__":
    unittest.main()
