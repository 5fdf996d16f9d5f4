"""What a hostile user tries: malformed .npy files, absurd sizes, outputs that cannot be written,
damaged bundles, values at the edges. Each gets a precise message and exit 2 (bad input) or 1
(the job failed), never a crash, exit 3 or a partial output file."""
import os
import signal
import struct
import subprocess
import time

from common import (ATTNC, BUILT_BACKENDS, CliTestCase, attnc, needs_backends, read_npy,
                    verdicts, write_npy)


def raw_npy(path, header, body=b"", version=1, header_length=None):
    """A .npy file exactly as given, however wrong."""
    text = header.encode()
    length = len(text) if header_length is None else header_length
    prefix = (b"\x93NUMPY\x01\x00" + struct.pack("<H", length) if version == 1
              else b"\x93NUMPY\x02\x00" + struct.pack("<I", length))
    with open(path, "wb") as f:
        f.write(prefix + text + body)


def f4_header(shape):
    return "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % shape


class MalformedNpy(CliTestCase):
    def setUp(self):
        super().setUp()
        self.bundle = self.compile("heads=2 d_k=4")

    def refused(self, header, mention, **kwargs):
        path = os.path.join(self.tmp, "q.npy")
        raw_npy(path, header, **kwargs)
        self.expect(attnc("run", self.bundle, "--q", path), 2, mention)

    def test_sizes_are_checked_before_anything_is_allocated(self):
        # Once: SIGSEGV (element count overflowed), 4.3 GB RSS, 3.2 GB zero-filled.
        self.refused(f4_header("(4294967296, 2, 2147483648, 4)"),
                     "has more bytes than the address space holds")
        self.refused("", "header length 4294967280 is past the 65536 bytes", version=2,
                     header_length=0xFFFFFFF0)
        self.refused(f4_header("(1, 2, 100000000, 4)"), "holds 64 bytes of data; its shape "
                     "(1, 2, 100000000, 4) of <f4 needs exactly 3200000000", body=b"\0" * 64)
        self.refused(f4_header("(1, 2, 3, 4)"), "needs exactly 96", body=b"\0" * 100)
        self.refused(f4_header("(1, 2, 3, 4)"), "truncated header", header_length=500)

    def test_headers_are_parsed_strictly(self):
        self.refused(f4_header("(1, 2, 3, 4x)"), "bad header")
        self.refused(f4_header("(1, -2, 3, 4)"), "non-negative integer")
        self.refused(f4_header("(" + "1, " * 17 + ")"), "more than 16 dims")
        self.refused("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,), }",
                     "key 'descr' is given twice")
        self.refused("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }",
                     "unsupported dtype '>f4'", body=b"\0" * 4)
        self.refused(f4_header("(1,)") + " junk", "text after the header's dict")
        # Once: the message echoed the descr, cut short at the NUL ("unsupported dtype '<f4").
        self.refused("{'descr': '<f4\0', 'fortran_order': False, 'shape': (1,), }",
                     "bad header: it holds the control character U+0000 at offset 14")


class FloatMasks(CliTestCase):
    def test_pytorch_additive_convention_or_refused(self):
        bundle = self.compile("heads=1 d_k=4 mask=tensor")
        q = os.path.join(self.tmp, "q.npy")
        write_npy(q, [0.25 * i for i in range(12)], [1, 1, 3, 4])
        keep = [1, 0, 1, 1, 1, 0, 0, 1, 1]
        as_bits = os.path.join(self.tmp, "bits.npy")
        as_floats = os.path.join(self.tmp, "floats.npy")
        write_npy(as_bits, keep, [1, 1, 3, 3], descr="|u1")
        write_npy(as_floats, [0.0 if k else float("-inf") for k in keep], [1, 1, 3, 3])
        outputs = []
        for mask in (as_bits, as_floats):
            out = os.path.join(self.tmp, "o%d.npy" % len(outputs))
            self.expect(attnc("run", bundle, "--q", q, "--k", q, "--v", q, "--mask", mask,
                              "--out", out), 0)
            outputs.append(read_npy(out)[2])
        self.assertEqual(outputs[0], outputs[1])
        write_npy(as_floats, [0.5] * 9, [1, 1, 3, 3])  # cast to u8 this once masked everything
        self.expect(attnc("run", bundle, "--q", q, "--mask", as_floats), 2,
                    "holds 0.5 at flat index 0; a float mask follows PyTorch's additive "
                    "convention, 0 (attend) or -inf (masked)")

    def test_integer_inputs_take_integers_in_range(self):
        bundle = self.compile("heads=1 d_k=4 mask=padding")
        lengths = os.path.join(self.tmp, "lengths.npy")
        write_npy(lengths, [2.5], [1])
        self.expect(attnc("run", bundle, "--seq-q", "3", "--lengths", lengths), 2,
                    "'lengths' takes i32 integers", "holds 2.5")
        write_npy(lengths, [7], [1], descr="<i4")
        self.expect(attnc("run", bundle, "--seq-q", "3", "--lengths", lengths), 2,
                    "length 7 of batch entry 0 is outside [0, Tk=3]")


class AbsurdSizesAndFlags(CliTestCase):
    def test_sizes_past_memory_or_64_bits(self):
        bundle = self.compile("heads=2 d_k=4")
        # Once: SIGSEGV; exit 0 with "4.9e15 GFLOP/s"; exit 3 "std::bad_alloc".
        self.expect(attnc("run", bundle, "--batch", "1073741824", "--seq-q", "4294967296"), 2,
                    "tensor 'q' would have more bytes than the address space holds")
        self.expect(attnc("run", bundle, "--batch", "4611686018427387904", "--seq-q", "2"), 2,
                    "more bytes than the address space holds")
        self.expect(attnc("run", bundle, "--seq-q", "1000000000"), 2,
                    "the call's tensors need", "GB of memory")

    def test_counts_and_lengths_out_of_range(self):
        bundle = self.compile("heads=1 d_k=4 mask=padding")
        for lengths in ("-1", "9", "2147483648", "3,"):
            self.expect(attnc("run", bundle, "--seq-q", "4", "--seq-k", "8", "--lengths",
                              lengths), 2, "--lengths")
        self.expect(attnc("run", bundle, "--threads", "-1"), 2, "--threads")
        self.expect(attnc("run", bundle, "--repeat", "0"), 2, "--repeat")
        self.expect(attnc("bench", bundle, "--runs", "0"), 2, "--runs")
        self.expect(attnc("bench", bundle, "--warmup", "-1"), 2, "--warmup")


@needs_backends("mlir")
class LargeHeadDims(CliTestCase):
    def test_tiles_past_the_stack_go_to_the_heap(self):
        # Once: SIGSEGV, two 32768 x 48 f32 tiles on the stack; and at d_k = 65536 a FAIL at
        # relative error 4.5e-6, the tolerance ignoring the length of the sums.
        out = os.path.join(self.tmp, "out")
        self.expect(attnc("compile", "d_k=32768", "--backend", "mlir", "-o", out), 0)
        bundle = [os.path.join(out, f) for f in os.listdir(out) if f.endswith(".so")][0]
        # Tq = 50 runs the prefill kernel, Tq = 3 the decode kernel beside it in the bundle.
        for tq in ("50", "3"):
            small_stack = subprocess.run(
                ["bash", "-c", 'ulimit -s 256 && exec "$0" "$@"', ATTNC,
                 "verify", bundle, "--seq-q", tq, "--seq-k", "7"],
                capture_output=True, text=True, timeout=300)
            self.expect(small_stack, 0, "PASS", "over sums of up to 32768 terms")


class NoPartialOutput(CliTestCase):
    def test_all_outputs_or_none(self):
        bundle = self.compile("heads=1 d_k=4 lse=true")
        out = os.path.join(self.tmp, "o.npy")
        # Once: exit 1 with o.npy written.
        self.expect(attnc("run", bundle, "--out", out, "--lse", "/nonexistent/l.npy"), 2,
                    "cannot write /nonexistent/l.npy: No such file or directory")
        self.assertFalse(os.path.exists(out))
        # Once: exit 3 and DIR.partial left beside it.
        self.expect(attnc("run", bundle, "--out", self.tmp), 2, "is a directory")
        self.expect(attnc("run", bundle, "--out", out, "--lse", os.path.join(self.tmp, "l.npy")),
                    0)
        self.assertEqual(sorted(os.listdir(self.tmp)), ["l.npy", "o.npy", "out"])


class Interrupts(CliTestCase):
    @needs_backends("halide")  # a compile long enough to interrupt
    def test_an_interrupted_compile_leaves_nothing(self):
        # Once: SIGINT or SIGTERM left -o DIR/.attnc-build-XXXXXX every time.
        for sig in (signal.SIGINT, signal.SIGTERM):
            out = os.path.join(self.tmp, "out%d" % sig)
            os.mkdir(out)
            p = subprocess.Popen([ATTNC, "compile", "heads=4 d_k=64 mask=causal", "--backend",
                                  "halide", "-o", out], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
            deadline = time.time() + 60
            while not os.listdir(out) and time.time() < deadline and p.poll() is None:
                time.sleep(0.005)
            time.sleep(0.2)  # well into the compile
            p.send_signal(sig)
            p.communicate(timeout=60)
            self.assertEqual(p.returncode, -sig)  # ended by the signal, as a shell expects
            self.assertEqual(os.listdir(out), [])

    def test_a_killed_compiles_staging_is_removed_by_the_next(self):
        out = os.path.join(self.tmp, "out")
        dead, starting = (os.path.join(out, ".attnc-build-" + n) for n in ("dead", "starting"))
        os.makedirs(dead)
        os.makedirs(starting)
        open(os.path.join(dead, ".lock"), "w").close()  # its holder is gone: the lock is free
        self.compile("heads=1 d_k=4", out)
        self.assertFalse(os.path.exists(dead))
        self.assertTrue(os.path.exists(starting))  # no lock yet: it may be a compile starting


class DamagedBundles(CliTestCase):
    def test_a_truncated_bundle_is_refused_before_loading(self):
        bundle = self.compile("heads=2 d_k=4")
        cut = os.path.join(self.tmp, "cut.so")
        with open(bundle, "rb") as f, open(cut, "wb") as g:
            g.write(f.read()[:os.path.getsize(bundle) // 2])  # once: SIGBUS in dlopen
        self.expect(attnc("run", cut), 1, "it is truncated")


class SpecialValues(CliTestCase):
    """NaN and infinities reach exactly the rows that use them, as in PyTorch's math path; the
    reference defines it (docs/spec.md) and verify compares NaN positions."""

    def test_kernels_agree_with_the_reference(self):
        for backend in BUILT_BACKENDS:
            specs = ["heads=1 d_k=4 lse=true", "heads=1 d_k=4 lse=true softcap=5",
                     "heads=1 d_k=4 weights=true"]
            for spec in specs:
                with self.subTest(backend=backend, spec=spec):
                    out = os.path.join(self.tmp, backend + str(len(spec)))
                    bundle = self.expect(attnc("compile", spec, "--backend", backend, "-o", out),
                                         0).stdout.strip()
                    self.check(bundle)

    def check(self, bundle):
        t, d = 5, 4
        base = [((i * 7) % 11) / 11.0 - 0.5 for i in range(t * d)]
        nan, inf = float("nan"), float("inf")
        cases = {"NaN in q row 1": ({1 * d + 2: nan}, {}),
                 "NaN in k row 3": ({}, {3 * d: nan}),
                 "+inf in q row 2": ({2 * d: inf}, {}),
                 "scores past f32": ({i: 1e30 for i in range(t * d)},
                                     {i: 1e30 for i in range(t * d)})}
        for name, (q_changes, k_changes) in cases.items():
            with self.subTest(name=name):
                paths = {}
                for tensor, changes in (("q", q_changes), ("k", k_changes), ("v", {})):
                    values = [changes.get(i, x) for i, x in enumerate(base)]
                    paths[tensor] = os.path.join(self.tmp, tensor + ".npy")
                    write_npy(paths[tensor], values, [1, 1, t, d])
                # Once: the reference and Halide gave 0 for a NaN query row, Halide finite rows
                # for NaN in k, the reference finite rows for scores that overflow f32, and
                # verify called matching NaNs a failure.
                self.expect(attnc("verify", bundle, "--q", paths["q"], "--k", paths["k"],
                                  "--v", paths["v"]), 0, "PASS")


class KvAppendSpecialValues(CliTestCase):
    def test_non_finite_new_rows_read_as_nan(self):
        # A new row holding NaN or ±inf is stored in a quantized cache as codes 0 with scale NaN,
        # so it reads as NaN (docs/spec.md). Once: an int8 cache stored int8(NaN), undefined (0
        # in release builds), so the kernels attended a finite key where the reference had NaN,
        # and an fp8 row of NaNs and zeros read as zeros on every backend and the reference.
        t, d = 3, 4
        nan, inf = float("nan"), float("inf")
        rows = {"NaN": [1, nan, 2, 3], "-inf": [-inf, 1, 2, 3], "NaN and zeros": [nan, 0, 0, 0]}
        seq_lens = os.path.join(self.tmp, "seq_lens.npy")
        write_npy(seq_lens, [5], [1], "<i4")
        k_new = os.path.join(self.tmp, "k_new.npy")
        o = os.path.join(self.tmp, "o.npy")
        for kv_dtype in ("int8", "fp8_e4m3"):
            # Row i sits at position i + 2 and sees keys 0 .. i + 2: the new row 1 (position 3)
            # reaches rows 1 and 2.
            spec = ("heads=1 d_k=4 mask=causal kv_cache=contiguous kv_append=true kv_dtype=" +
                    kv_dtype)
            for backend, reason in verdicts(spec).items():
                if reason:
                    continue
                out = os.path.join(self.tmp, backend + kv_dtype)
                bundle = self.expect(attnc("compile", spec, "--backend", backend, "-o", out),
                                     0).stdout.strip()
                for name, row in rows.items():
                    with self.subTest(backend=backend, kv_dtype=kv_dtype, row=name):
                        write_npy(k_new, [1, 2, 3, 4] + row + [4, 3, 2, 1], [1, 1, t, d])
                        call = ("--seq-q", str(t), "--seq-k", "5", "--param", "k_new=" + k_new,
                                "--param", "seq_lens=" + seq_lens)
                        self.expect(attnc("verify", bundle, *call), 0, "PASS")
                        self.expect(attnc("run", bundle, *call, "--out", o), 0)
                        values = read_npy(o)[2]
                        self.assertFalse(any(v != v for v in values[:d]), values)
                        self.assertTrue(all(v != v for v in values[d:]), values)


class ManyKernelArguments(CliTestCase):
    def test_every_backend_runs_what_it_compiles(self):
        # Once: the mlir backend compiled kernels of more than 12 arguments (and auto chose it)
        # whose every call failed, "13 arguments, at most 12 supported". Here 13: three aux
        # tensors on an int8 paged cache with sinks and lse.
        spec = ('heads=2 d_k=16 kv_cache=paged page_size=16 kv_dtype=int8 sinks=true lse=true '
                'aux="x:f32[heads] y:f32[heads] z:f32[heads,Tk]" '
                'score_mod="score + x[h] + y[h] - z[h, kv_idx]"')
        for backend, reason in verdicts(spec).items():
            if reason:
                continue
            with self.subTest(backend=backend):
                out = os.path.join(self.tmp, backend)
                bundle = self.expect(attnc("compile", spec, "--backend", backend, "-o", out),
                                     0).stdout.strip()
                for sizes in (("--seq-q", "1", "--seq-k", "64"),
                              ("--batch", "3", "--seq-q", "7", "--seq-k", "96")):
                    self.expect(attnc("verify", bundle, *sizes), 0, "PASS")


class ValuesNearTheMaximum(CliTestCase):
    def test_no_backend_overflows_a_weighted_mean(self):
        # Once: every output inf on halide and mlir; o is a weighted mean of v, so it cannot
        # exceed max |v| (3.38e38 is near bf16's and f32's maximum).
        t, d = 300, 8
        v = os.path.join(self.tmp, "v.npy")
        write_npy(v, [3.38e38 if (i // d) % 3 else 2.0e38 for i in range(t * d)], [1, 1, t, d])
        for backend in BUILT_BACKENDS:
            for dtype in ("f32", "bf16"):
                with self.subTest(backend=backend, dtype=dtype):
                    out = os.path.join(self.tmp, backend + dtype)
                    bundle = self.expect(attnc("compile", "heads=1 d_k=8 mask=causal lse=true "
                                               "dtype=" + dtype, "--backend", backend, "-o",
                                               out), 0).stdout.strip()
                    self.expect(attnc("verify", bundle, "--seq-q", str(t), "--v", v), 0, "PASS")


class LenientOptions(CliTestCase):
    def test_compile_options_are_checked(self):
        out = os.path.join(self.tmp, "out")
        # Once: exit 0 and a header that does not compile.
        self.expect(attnc("compile", "d_k=8", "--backend", "reference",
                          "--emit", "lib", "--name", "class", "-o", out), 2,
                    "--name class", "C or C++ keyword")
        self.expect(attnc("compile", "d_k=8", "--backend", "reference",
                          "--emit", "lib", "--name", "__x", "-o", out), 2,
                    "reserved")
        self.expect(attnc("compile", "d_k=8", "--backend", "reference",
                          "-o", ""), 2, "empty path")  # once: exit 1
        self.expect(attnc("compile", "d_k=8", "--backend", "reference",
                          "--schedule", "key_block=64,key_block=32", "-o",
                          out), 2, "--schedule names key_block twice")
        self.expect(attnc("compile", "d_k=8", "--backend", "reference",
                          "--target", "host,", "-o", out), 2,
                    "--target host,: lists an empty name")
        r = self.expect(attnc("compile", "d_k=8", "--backend", "reference",
                              "--tuned-for", "0", "-o", out), 2, "--tuned-for")
        self.assertLess(len(r.stderr), 300, r.stderr)  # once: a 300-digit bound
        self.expect(attnc("compile", "d_k=8", "--backend", "reference", "-o", "/proc/attnc-out"), 2,
                    "cannot create output directory /proc/attnc-out: ")
        self.assertFalse(os.path.exists(out))

    def test_bench_names_the_bundle_that_refuses(self):
        f32 = self.compile("heads=2 d_k=8", os.path.join(self.tmp, "a"))
        bf16 = self.compile("heads=2 d_k=8 dtype=bf16", os.path.join(self.tmp, "b"))
        self.expect(attnc("bench", f32, "--against", bf16, "--runs", "1", "--no-baseline"), 2,
                    "--against %s: tensor 'q' has dtype f32; expected bf16" % bf16)


class SpecEdges(CliTestCase):
    def test_values_no_kernel_can_honour(self):
        # Once: exit 3 from std::stod.
        self.expect(attnc("spec", "d_k=64 scale=4.9e-324", "--json"), 2,
                    "scale=4.9e-324: expected a normal f32 number")
        self.expect(attnc("spec", "d_k=64 scale=1.79e308"), 2, "below 3.4028235e38")

    def test_the_canonical_form_round_trips(self):
        for spec in ("variant=mha heads=2 d_k=20000", "d_k=64 scale=1.1754944e-38",
                     "preset=llama3-8b", "variant=additive d_k=7 d_q=5 d_attn=3"):
            canonical = self.expect(attnc("spec", spec), 0).stdout.strip()
            self.assertEqual(self.expect(attnc("spec", canonical), 0).stdout.strip(), canonical)
        # Once: accepted, then its own canonical form (d_model=80000) refused.
        self.expect(attnc("spec", "variant=mha heads=2 d_k=40000"), 2, "makes d_model=80000")

    def test_json_files_are_read_strictly(self):
        path = os.path.join(self.tmp, "s.json")
        for text, mention in (('{"d_k": 64, "d_k": 32}', "key 'd_k' is given twice"),
                              ('{"d_k": "64"}', 'the JSON string "64" is not allowed'),
                              ('{"d_k": 64,\n "heads" 8}', "line 2, column"),
                              # Once: "attnc: error: mask=cau", cut short at the NUL.
                              ('{"d_k": 64, "mask": "cau\\u0000sal"}',
                               'mask: "cau\\u0000sal" holds the control character U+0000 at '
                               'offset 3; a spec is printable text')):
            with open(path, "w") as f:
                f.write(text)
            self.expect(attnc("spec", path), 2, mention)
        os.symlink("/dev/zero", os.path.join(self.tmp, "zero.json"))  # once: a hang
        self.expect(attnc("spec", os.path.join(self.tmp, "zero.json")), 2, "not a regular file")
