"""Ahead of time: fat bundles (one kernel per target, the runtime picks), linked libraries."""
import json
import os
import platform
import shutil
import subprocess
import unittest

from common import CliTestCase, attnc, host_flags, needs_backends

X86 = platform.machine() == "x86_64"


@unittest.skipUnless(X86, "the fat bundles here hold x86-64 levels")
@needs_backends("halide", "mlir")
class FatBundles(CliTestCase):
    SPEC = "heads=2 kv_heads=1 d_k=16 mask=causal"
    SHAPE = ["--batch", "2", "--seq-q", "37", "--seq-k", "53"]

    def fat(self, backend, targets):
        out = os.path.join(self.tmp, backend)
        r = self.expect(attnc("compile", self.SPEC, "--backend", backend, "--target", targets,
                              "-o", out), 0)
        bundle = r.stdout.split()[0]
        self.assertTrue(bundle.endswith("_fat.so"), bundle)
        with open(bundle[:-3] + ".json") as f:
            return bundle, json.load(f)

    def test_runs_the_best_target_this_cpu_has_and_each_forced_one(self):
        bundle, manifest = self.fat("halide", "x86-64-avx2,x86-64-sapphirerapids,x86-64-avx512")
        names = [t["name"] for t in manifest["targets"]]
        # Best first whatever the order given; "target" is the one older runtimes run.
        self.assertEqual(names, ["x86-64-sapphirerapids", "x86-64-avx512", "x86-64-avx2"])
        self.assertEqual(manifest["target"]["name"], "x86-64-avx2")
        flags = host_flags()
        runnable = [t["name"] for t in manifest["targets"] if set(t["cpu_features"]) <= flags]
        self.assertTrue(runnable, "this CPU runs none of the targets")
        r = self.expect(attnc("run", bundle, "--verbose", *self.SHAPE), 0)
        self.assertIn("attnc: target %s (the first of the bundle's 3 targets" % runnable[0],
                      r.stderr)
        for name in names:
            env = {"ATTNC_TARGET": name}
            if name in runnable:
                self.expect(attnc("verify", bundle, *self.SHAPE, env=env), 0, "PASS")
                r = self.expect(attnc("run", bundle, "-v", *self.SHAPE, env=env), 0)
                self.assertIn("target %s (forced by ATTNC_TARGET)" % name, r.stderr)
            else:
                self.expect(attnc("verify", bundle, *self.SHAPE, env=env), 1,
                            "ATTNC_TARGET=%s cannot run here" % name, "lacks")
        self.expect(attnc("run", bundle, *self.SHAPE, env={"ATTNC_TARGET": "x86-64-avx9"}), 1,
                    "ATTNC_TARGET=x86-64-avx9 names no target of this bundle; it holds: "
                    "x86-64-sapphirerapids, x86-64-avx512, x86-64-avx2")

    def test_mlir_kernels_make_fat_bundles_too(self):
        bundle, manifest = self.fat("mlir", "x86-64-avx2,x86-64-avx512")
        self.assertEqual(manifest["backend"], "mlir")
        for target in manifest["targets"]:
            env = {"ATTNC_TARGET": target["name"]}
            if set(target["cpu_features"]) <= host_flags():
                self.expect(attnc("verify", bundle, *self.SHAPE, env=env), 0, "PASS")
            else:  # AVX-512 on an AVX2 host: refused with the reason
                self.expect(attnc("verify", bundle, *self.SHAPE, env=env), 1, "lacks")

    def test_gpu_code_is_a_target_like_the_others(self):
        bundle, manifest = self.fat("halide", "x86-64-avx2,cuda-sm_90")
        self.assertEqual([t["name"] for t in manifest["targets"]], ["cuda-sm_90", "x86-64-avx2"])
        self.assertEqual(manifest["targets"][0]["device"], "cuda")
        r = self.expect(attnc("run", bundle, "-v", *self.SHAPE), 0)
        if "target cuda-sm_90" not in r.stderr:  # no usable GPU here: the CPU code runs
            self.assertIn("target x86-64-avx2 (the first of the bundle's 2 targets this host "
                          "supports; passed over cuda-sm_90: ", r.stderr)
        self.expect(attnc("verify", bundle, *self.SHAPE), 0, "PASS")

    def test_one_target_bundles_ignore_attnc_target(self):
        bundle = self.compile(self.SPEC)
        r = self.expect(attnc("run", bundle, "-v", *self.SHAPE, env={"ATTNC_TARGET": "nope"}), 0)
        self.assertIn("target host (the bundle's only target)", r.stderr)


@needs_backends("halide")
class LinkedLibraries(CliTestCase):
    def test_writes_an_archive_a_typed_header_and_the_manifest(self):
        out = os.path.join(self.tmp, "lib")
        r = self.expect(attnc("compile", "heads=2 d_k=16 mask=padding", "--backend", "halide",
                              "--emit", "lib", "--name", "padded_attention", "-o", out), 0)
        self.assertEqual(sorted(os.path.basename(f) for f in r.stdout.split()),
                         ["libpadded_attention.a", "padded_attention.h"])
        self.assertEqual(sorted(os.listdir(out)), ["libpadded_attention.a", "padded_attention.h",
                                                   "padded_attention.json"])
        # One global symbol: everything else (the Halide runtime too) is sealed inside.
        nm = subprocess.run(["nm", "-g", "--defined-only", os.path.join(out,
                             "libpadded_attention.a")], capture_output=True, text=True, check=True)
        defined = [line.split()[-1] for line in nm.stdout.splitlines() if line.count(" ") >= 2]
        self.assertEqual(defined, ["padded_attention_kernel"])
        with open(os.path.join(out, "padded_attention.h")) as f:
            header = f.read()
        self.assertIn("extern const attnc_kernel_exports padded_attention_kernel;", header)
        self.assertIn("class padded_attention {", header)
        self.assertIn("void operator()(::DLTensor& q, ::DLTensor& k, ::DLTensor& v, "
                      "::DLTensor& lengths, ::DLTensor& o, ::int32_t num_threads = 0) const", header)
        self.assertIn("//   lengths: input, i32, [B]: valid keys per batch", header)

    def test_bad_names_and_targets_exit_2_without_output(self):
        out = os.path.join(self.tmp, "never")
        spec = "heads=2 d_k=16"
        self.expect(attnc("compile", spec, "--backend", "halide", "--emit", "lib", "--name",
                          "9lives", "-o", out), 2, "--name 9lives", "C identifier")
        self.expect(attnc("compile", spec, "--name", "k", "-o", out), 2, "add --emit lib")
        self.expect(attnc("compile", spec, "--backend", "halide", "--target",
                          "x86-64-avx2,x86-64-avx2", "-o", out), 2,
                    "--target lists x86-64-avx2 twice")
        self.expect(attnc("compile", spec, "--backend", "halide", "--target",
                          "host,arm-64-linux", "--emit", "lib", "-o", out), 2,
                    "arm-64-linux is a cross target")  # nothing sealed is left behind either
        self.assertFalse(os.path.exists(out))


class LinkedHeaderNames(CliTestCase):
    """The header declares the user's names (--name, each aux tensor's) as C++ identifiers: every
    name attnc accepts compiles, whatever macros the includer defines (issue 52: an aux tensor
    named NULL, errno or num_threads made a header that did not)."""

    ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    # Standard macros (NULL, errno, assert, linux in GNU mode) and the header's own names.
    NAMES = ["NULL", "errno", "assert", "linux", "DLTensor", "int32_t", "std", "attnc", "Args",
             "run", "args", "tensors", "bundle_"]

    def expect_compiles(self, headers, text):
        """TEXT, a C++ source including the headers in HEADERS, passes the compiler's checks."""
        source = os.path.join(self.tmp, "use.cpp")
        with open(source, "w") as f:
            f.write(text)
        r = subprocess.run([os.environ.get("CXX", "c++"), "-std=gnu++20", "-fsyntax-only", "-I",
                            headers, "-I", os.path.join(self.ROOT, "runtime", "include"), source],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)

    @unittest.skipUnless(shutil.which(os.environ.get("CXX", "c++")), "no C++ compiler")
    def test_hostile_names_compile(self):
        out = os.path.join(self.tmp, "lib")
        aux = " ".join(n + ":f32[Tk]" for n in self.NAMES)
        score = " + ".join(n + "[kv_idx]" for n in self.NAMES)
        self.expect(attnc("compile", 'd_k=8 mask=padding aux="%s" score_mod="score + %s"'
                          % (aux, score), "--backend", "reference", "--emit", "lib", "--name",
                          "attnc", "-o", out), 0)
        self.expect_compiles(out, "#include <cassert>\n#include <cerrno>\n#include <cstddef>\n"
                                  "#include \"attnc.h\"\n"
                                  "int main() { attnc::kernels::attnc::Args args; (void)args;\n"
                                  "  return errno + linux + (NULL == nullptr); }\n")

    @unittest.skipUnless(shutil.which(os.environ.get("CXX", "c++")), "no C++ compiler")
    def test_the_backward_entry_has_its_arguments_and_method(self):
        out = os.path.join(self.tmp, "lib")
        self.expect(attnc("compile", "heads=2 d_k=8 bias=true lse=true backward=true",
                          "--backend", "reference", "--emit", "lib", "--name", "trained", "-o",
                          out), 0)
        with open(os.path.join(out, "trained.h")) as f:
            header = f.read()
        self.assertIn("//   grad_bias: output, f32, [B|1, 2|1, Tq, Tk]: dL/dbias", header)
        self.expect_compiles(out, "#include \"trained.h\"\n"
                             "void step(const attnc::kernels::trained& kernel, ::DLTensor* t) {\n"
                             "  kernel.run({.q = t, .k = t, .v = t, .bias = t, .o = t, .lse = t});\n"
                             "  kernel.run_backward({.q = t, .k = t, .v = t, .bias = t, .o = t,\n"
                             "      .lse = t, .grad_o = t, .grad_q = t, .grad_k = t, .grad_v = t,\n"
                             "      .grad_bias = t});\n}\n")

    def test_names_the_header_cannot_declare_exit_2(self):
        out = os.path.join(self.tmp, "never")
        for name in ("run", "target", "Args", "spec", "bundle_", "run_backward", "BackwardArgs"):
            self.expect(attnc("compile", "d_k=8", "--backend", "reference", "--emit", "lib",
                              "--name", name, "-o", out), 2,
                        "--name %s" % name, "a member of the header's class")
        for name in ("class", "this", "num_threads"):
            self.expect(attnc("compile", 'd_k=8 aux="%s:f32[Tk]" score_mod="%s[kv_idx]"'
                              % (name, name), "--backend", "reference", "--emit", "lib", "-o",
                              out), 2, "aux=\"%s:f32[Tk]\": '%s'" % (name, name))
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    unittest.main()
