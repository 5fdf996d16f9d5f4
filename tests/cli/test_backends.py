"""attnc backends: the capability table that refusals, the numerics tests, bench's baseline and
the README read, and the choice `--backend auto` (compile's default) makes from it."""
import json
import os
import re
import unittest

from common import BUILT_BACKENDS, CliTestCase, attnc, needs_backends, verdicts

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


class CapabilityTable(CliTestCase):
    def test_table_has_a_row_per_backend_and_family(self):
        table = json.loads(self.expect(attnc("backends", "--json"), 0).stdout)
        names = [b["name"] for b in table["backends"]]
        self.assertEqual(len(names), len(set(names)))
        self.assertTrue(set(names) <= {"mlir", "halide", "reference"}, names)
        # auto's order: the fused backends ranked 1, 2, ...; the reference (rank 0) last.
        self.assertEqual(names[-1], "reference")
        self.assertEqual([b["auto_rank"] for b in table["backends"]],
                         list(range(1, len(names))) + [0])
        for backend in table["backends"]:
            self.assertEqual(backend["targets"][0], "host")
            families = [row["family"] for row in backend["coverage"]]
            self.assertIn("cpu", families)
            # A family may have several rows (MLIR's backward kernel), never the same one twice.
            rows = [json.dumps(row, sort_keys=True) for row in backend["coverage"]]
            self.assertEqual(len(rows), len(set(rows)))
            for row in backend["coverage"]:
                for axis in ("variants", "masks", "outputs", "dtypes"):
                    self.assertTrue(row[axis], (backend["name"], axis))
                self.assertIn("o", row["outputs"])
        self.assertEqual([b["name"] for b in table["baselines"]], ["unfused"])

    @needs_backends("halide", "mlir")
    def test_readme_coverage_is_the_commands_output(self):
        with open(README) as f:
            text = f.read()
        found = re.search(r"<!-- attnc backends -->\n(.*?)<!-- /attnc backends -->", text, re.S)
        self.assertIsNotNone(found, "README.md lost its coverage table markers")
        self.assertEqual(found.group(1), self.expect(attnc("backends"), 0).stdout,
                         "README.md's coverage table differs from `attnc backends`: paste it anew")

    def test_verdicts_name_the_gap(self):
        v = verdicts("heads=2 d_k=16 mask=causal")
        self.assertIsNone(v["reference"])
        if "mlir" in BUILT_BACKENDS:
            self.assertIsNone(v["mlir"])
            self.assertIsNone(verdicts("variant=linear d_k=8")["mlir"])
            self.assertIsNone(verdicts("variant=linear d_k=8", "cuda-sm_90")["mlir"])
            appending = verdicts("d_k=8 kv_cache=contiguous kv_append=true", "cuda-sm_90")
            self.assertIn("the mlir backend does not support kv_append on cuda targets",
                          appending["mlir"])
            self.assertIsNone(verdicts("variant=additive d_k=8 weights=true", "cuda-sm_90")["mlir"])
        if "halide" in BUILT_BACKENDS:
            self.assertIsNone(verdicts("variant=linear d_k=8")["halide"])
            self.assertIn("does not support dtype=bf16 on cuda targets",
                          verdicts("d_k=8 dtype=bf16", "cuda-sm_90")["halide"])
            # Each gap with its own reason, not every reason the row has.
            backward = verdicts("d_k=8 lse=true backward=true")["halide"]
            self.assertIn("backward=true on cpu targets (a Halide backward would recompute dS",
                          backward)
            self.assertNotIn("8-bit float", backward)
            self.assertIn("(Halide 14 has no 8-bit float type; the mlir backend decodes them)",
                          verdicts("d_k=8 kv_cache=contiguous kv_dtype=fp8_e4m3")["halide"])
        self.assertIn("not a target of the reference backend",
                      verdicts("d_k=8", "cuda-sm_90")["reference"])
        self.expect(attnc("backends", "--spec", "d_k=8"), 0, "reference: builds it", "auto: ")
        self.expect(attnc("backends", "--spec", "d_k=0"), 2, "d_k=0")
        self.expect(attnc("backends", "--target", "cuda-sm_90"), 2, "--target is for --spec")

    def test_auto_picks_the_fastest_covering_backend(self):
        def auto(spec, target="host"):
            r = self.expect(attnc("backends", "--spec", spec, "--target", target, "--json"), 0)
            return json.loads(r.stdout)["auto"]
        fused = [b for b in ("mlir", "halide") if b in BUILT_BACKENDS]
        self.assertEqual(auto("heads=2 d_k=16"), fused[0] if fused else None)
        # Every variant on MLIR ran 1.13-3.65x as fast as Halide's (scripts/bench-family,
        # docs/benchmarks.md): auto takes MLIR for each, on CPUs and on CUDA.
        for spec in ("variant=linear d_k=8", "variant=linformer d_k=8 proj_len=4",
                     "variant=mha heads=2 d_model=16", "variant=additive d_k=8 d_attn=8"):
            self.assertEqual(auto(spec), fused[0] if fused else None)
        self.assertEqual(auto("variant=linformer d_k=8 proj_len=4", "cuda-sm_90"),
                         "mlir" if "mlir" in fused else None)
        # MLIR builds strided and dilated but tests each key of their span, where Halide gathers
        # residue classes: auto passes over MLIR. Its CPU kernels skip block_sparse's and
        # BigBird's dead blocks (per chunk of keys), so those stay with the fastest; on CUDA
        # its tensor-core kernels visit them.
        for spec in ("d_k=8 mask=strided stride=3", "d_k=8 mask=dilated window_left=2 dilation=3"):
            self.assertEqual(auto(spec), "halide" if "halide" in fused else (fused or [None])[0])
        for spec in ("d_k=8 mask=causal+block_sparse block=16",
                     "d_k=8 mask=bigbird block=16 random_blocks=2 seed=1"):
            self.assertEqual(auto(spec), fused[0] if fused else None)
            self.assertEqual(auto(spec, "cuda-sm_90"),
                             "halide" if "halide" in fused else (fused or [None])[0])
        # Only MLIR builds linear attention for a GPU; nothing fused writes kv_append's rows into
        # a GPU's cache, and the reference is never auto's pick.
        self.assertEqual(auto("variant=linear d_k=8", "cuda-sm_90"),
                         "mlir" if "mlir" in fused else None)
        self.assertIsNone(auto("d_k=8 kv_cache=contiguous kv_append=true", "cuda-sm_90"))


class CompileDefaultsToAuto(CliTestCase):
    @needs_backends("halide", "mlir")
    def test_no_backend_means_the_fastest_covering_one(self):
        out = os.path.join(self.tmp, "out")
        for spec, backend in (("heads=2 d_k=16 mask=causal", "mlir"),
                              ("heads=2 d_k=16 mask=strided stride=3", "halide")):
            with self.subTest(spec=spec):
                bundle = self.expect(attnc("compile", spec, "-o", out), 0).stdout.strip()
                self.assertTrue(bundle.endswith("_%s.so" % backend), bundle)
                self.expect(attnc("verify", bundle, "--seq-q", "9", "--seq-k", "21"), 0, "PASS")

    @needs_backends("halide", "mlir")
    def test_auto_without_a_covering_backend_says_why(self):
        r = self.expect(attnc("compile", "d_k=8 kv_cache=contiguous kv_append=true", "--target",
                              "cuda-sm_90", "-o", os.path.join(self.tmp, "never")), 2,
                        "--backend auto: no fused backend", "the mlir backend does not support",
                        "the halide backend does not support", "--backend reference")
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "never")), r.stderr)


if __name__ == "__main__":
    unittest.main()
