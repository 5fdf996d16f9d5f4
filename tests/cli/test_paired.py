"""The MLIR backend's bf16 products in pairs, K and V^T laid out in a phase of their own: on AMX
tiles (schedule family x86-amx, amx=1: QK^T and PV as tdpbf16ps) and as AVX512-BF16 dot products
(x86-avx512-bf16, dot=1: vdpbf16ps). The code is checked on every machine (the assembly for
x86-64-sapphirerapids has the tile products, for x86-64-zen4 the dot products; specs they cannot
take keep the f32 products); the numerics against the f64 reference where this CPU has AMX, or
AVX512-BF16, else the test says it is skipped for want of them."""
import json
import os
import unittest

from common import CliTestCase, attnc, host_flags, needs_backends, write_npy


# Odd shapes (B, Tq, Tk): Tq != Tk both ways, Tq = 1, sizes off the 16-row tiles, the 32-key
# chunks and the 128-key blocks, several blocks. `--emit so,asm` compiles the prefill kernel
# alone (no decode kernel beside it), so Tq 1 and 13 run the paired products too.
SHAPES = [("2", "13", "29"), ("1", "1", "300"), ("3", "40", "17"), ("1", "130", "257")]

# Each spec with the schedule it runs (empty: the family's default, 48-row tiles, 128-key blocks).
CASES = [
    ("heads=4 kv_heads=2 d_k=64 dtype=bf16", ""),
    # Tq > Tk with bottom-right causal: the first Tq - Tk rows keep no key.
    ("heads=2 d_k=128 d_v=64 dtype=bf16 mask=causal lse=true", ""),
    ("heads=2 d_k=32 d_v=48 dtype=bf16 layout=bshd mask=causal causal_align=top_left", ""),
    # Blocks whose first keys are dead (the live chunks start inside the block).
    ("heads=2 d_k=64 dtype=bf16 mask=block_sparse block=16 lse=true", ""),
    ("heads=2 d_k=32 dtype=bf16 dropout=0.3 seed=5 weights=true", ""),
    ("heads=4 kv_heads=1 d_k=64 dtype=bf16 mask=causal+window window_left=37 sinks=true", ""),
    # A paged cache, gathered into plain rows first, ragged lengths.
    ("heads=4 kv_heads=2 d_k=64 kv_cache=paged page_size=16 mask=causal dtype=bf16", ""),
    # Other tiles: 4 and 6 row tiles (two batches of accumulators), 64- and 32-key blocks.
    ("heads=2 kv_heads=1 d_k=96 dtype=bf16 mask=causal", "query_tile=64,key_block=64"),
    ("heads=2 d_k=64 d_v=32 dtype=bf16", "query_tile=96,key_block=32"),
]

# The decode kernel's cases (decode=1: vectors along the head dim, a GQA group's rows in one
# task): GQA, a paged cache with a causal step, a padding mask's ragged lengths, dropout,
# bshd rows (a head's keys H_kv rows apart), d_v off d_k; the shapes: Tq 1, 3, 5 and 16,
# Tk odd (an odd last key alone), below and across the 128-key blocks and splits.
DECODE_CASES = [
    "heads=8 kv_heads=2 d_k=128 dtype=bf16",
    "heads=4 kv_heads=1 d_k=96 d_v=64 dtype=bf16 kv_cache=paged page_size=16 mask=causal",
    "heads=6 kv_heads=2 d_k=64 dtype=bf16 mask=padding",
    "heads=2 d_k=64 dtype=bf16 dropout=0.2 seed=3 lse=true",
    "heads=4 kv_heads=2 d_k=64 d_v=32 dtype=bf16 layout=bshd",
]
DECODE_SHAPES = [("1", "1", "300"), ("2", "3", "1001"), ("3", "16", "77"), ("1", "5", "16")]


class PairedProducts:
    """What both kinds of paired products share; a test class mixes it with CliTestCase."""
    TARGET = None  # the target whose products the class checks
    PRODUCT = None  # their instruction
    WITHOUT = None  # the schedule that turns them off
    RUN_TARGET = None  # the target whose bundles run them on this CPU, where it has them
    POISONED = ("", "key_block=32")  # the schedules verify_poisoned_padding runs

    NEEDS = ()  # the /proc/cpuinfo flags that running them needs
    UNIT = None  # and the unit's name

    def skip_unless_the_cpu_has_them(self):
        if not set(self.NEEDS) <= host_flags():
            self.skipTest("skipped: no %s (this CPU lacks %s)"
                          % (self.UNIT, " or ".join(self.NEEDS)))

    def test_numerics_against_the_reference(self):
        self.skip_unless_the_cpu_has_them()
        verify_cases(self, self.RUN_TARGET, self.PRODUCT)

    def test_values_past_a_padded_length_never_reach_the_output(self):
        self.skip_unless_the_cpu_has_them()
        for schedule in self.POISONED:
            verify_poisoned_padding(self, self.RUN_TARGET, schedule,
                                    3 if "decode=1" in schedule else 40)

    def assembly(self, spec, target=None, schedule=None):
        extra = ["--schedule", schedule] if schedule else []
        r = self.expect(attnc("compile", spec, "--backend", "mlir", "--target",
                              target or self.TARGET, "--emit", "asm", "-o", self.tmp, *extra), 0)
        with open(r.stdout.strip()) as f:
            return f.read()

    def fat_bundle(self):
        """A GQA causal bf16 bundle for x86-64-avx512 and TARGET: its path, its targets in the
        order the runtime tries them, and their CPU features."""
        r = self.expect(attnc("compile", "heads=4 kv_heads=2 d_k=64 dtype=bf16 mask=causal",
                              "--backend", "mlir", "--target", "x86-64-avx512," + self.TARGET,
                              "-o", self.tmp), 0)
        bundle = r.stdout.split()[0]
        with open(bundle[:-3] + ".json") as f:
            targets = json.load(f)["targets"]
        return bundle, [t["name"] for t in targets], {t["name"]: t["cpu_features"] for t in targets}

    def test_specs_the_products_cannot_take_keep_the_f32_products(self):
        for spec in ("heads=8 d_k=128 mask=causal", "heads=8 d_k=80 dtype=bf16",
                     "heads=8 d_k=128 dtype=f16"):
            with self.subTest(spec=spec):
                self.assertNotIn(self.PRODUCT, self.assembly(spec))
        self.assertNotIn(self.PRODUCT, self.assembly("heads=8 d_k=128 dtype=bf16",
                                                     target="x86-64-avx512"))
        self.assertNotIn(self.PRODUCT, self.assembly("heads=8 d_k=128 dtype=bf16",
                                                     schedule=self.WITHOUT))


@needs_backends("mlir")
class AmxCode(PairedProducts, CliTestCase):
    TARGET, PRODUCT, WITHOUT = "x86-64-sapphirerapids", "tdpbf16ps", "amx=0"
    RUN_TARGET, NEEDS, UNIT = "host", ("amx_tile", "amx_bf16"), "AMX"

    def test_bf16_products_are_tiles_on_sapphire_rapids(self):
        asm = self.assembly("heads=8 d_k=128 dtype=bf16 mask=causal")
        self.assertIn("tdpbf16ps", asm)
        self.assertIn("ldtilecfg", asm)

    def test_amx_schedule_outside_the_family_is_refused(self):
        self.expect(attnc("compile", "heads=8 d_k=128", "--backend", "mlir", "--target",
                          "x86-64-sapphirerapids", "--schedule", "amx=1", "-o", self.tmp), 2,
                    "amx=1 needs the x86-amx family", "x86-avx512")
        self.expect(attnc("compile", "heads=8 d_k=128 dtype=bf16", "--backend", "mlir",
                          "--target", "x86-64-sapphirerapids", "--schedule", "key_block=16",
                          "-o", self.tmp), 2, "key_block a multiple of 32")

    def test_fat_bundle_member_for_amx(self):
        # The Sapphire Rapids member takes AMX tiles and needs the tile state; the runtime picks
        # it first where the CPU has AMX, and runs the AVX-512 member when told to.
        bundle, _, members = self.fat_bundle()
        self.assertIn("amx_tile", members["x86-64-sapphirerapids"])
        self.assertNotIn("amx_tile", members["x86-64-avx512"])
        self.skip_unless_the_cpu_has_them()
        shape = ["--batch", "2", "--seq-q", "70", "--seq-k", "45"]
        r = self.expect(attnc("run", bundle, "--verbose", *shape), 0)
        self.assertIn("attnc: target x86-64-sapphirerapids", r.stderr)
        for name in members:
            self.expect(attnc("verify", bundle, *shape, env={"ATTNC_TARGET": name}), 0, "PASS")

    def test_only_kernels_with_tiles_need_them(self):
        # The manifest lists AMX (so the loader asks Linux for the tile state, and refuses a CPU
        # without tiles) only where the code has tile instructions: not for f32 on the same
        # target.
        def features(spec):
            out = os.path.join(self.tmp, str(abs(hash(spec))))
            r = self.expect(attnc("compile", spec, "--backend", "mlir", "--target", self.TARGET,
                                  "--schedule", "decode=0", "-o", out), 0)
            with open(r.stdout.split()[0][:-3] + ".json") as f:
                return json.load(f)["target"]["cpu_features"]
        self.assertIn("amx_tile", features("heads=4 d_k=64 dtype=bf16"))
        f32 = features("heads=4 d_k=64")
        self.assertNotIn("amx_tile", f32)
        self.assertNotIn("amx_bf16", f32)
        self.assertIn("avx512f", f32)



def verify_poisoned_padding(test, target, schedule, tq):
    """V is NaN or inf past each sequence's length (memory a cache never wrote): a product that
    multiplies it by its P = 0 gives NaN where the reference attends only the keys kept. Lengths
    odd and off the 32-key chunks, in the first and a later block; Tq rows (3: the decode
    kernel's steps)."""
    b, h, tk, d = 2, 2, 100, 64
    lengths = [5, 69]
    ramp = lambda rows: [((i * 7919) % 1000) / 500.0 - 1.0 for i in range(b * h * rows * d)]
    values = ramp(tk)
    for batch, length in enumerate(lengths):
        for head in range(h):
            for key in range(length, tk):
                for c in range(d):
                    values[((batch * h + head) * tk + key) * d + c] = (
                        float("nan") if batch == 0 else float("inf"))
    paths = {}
    for name, rows, data in (("q", tq, ramp(tq)), ("k", tk, ramp(tk)), ("v", tk, values)):
        paths[name] = os.path.join(test.tmp, name + ".npy")
        write_npy(paths[name], data, (b, h, rows, d))
    with test.subTest(schedule=schedule):
        out = os.path.join(test.tmp, "padding" + schedule.replace(",", "_"))
        extra = ["--schedule", schedule] if schedule else []
        r = test.expect(attnc("compile", "heads=2 d_k=64 dtype=bf16 mask=padding", "--backend",
                              "mlir", "--target", target, "-o", out, *extra), 0)
        test.expect(attnc("verify", r.stdout.split()[0], "--q", paths["q"], "--k", paths["k"],
                          "--v", paths["v"], "--lengths", ",".join(map(str, lengths))), 0, "PASS")


def verify_cases(test, target, product):
    """Every case compiled for `target`, its assembly holding `product`, verified on SHAPES."""
    for spec, schedule in CASES:
        with test.subTest(spec=spec, schedule=schedule):
            out = os.path.join(test.tmp, str(abs(hash((spec, schedule)))))
            extra = ["--schedule", schedule] if schedule else []
            r = test.expect(attnc("compile", spec, "--backend", "mlir", "--target", target,
                                  "--emit", "so,asm", "-o", out, *extra), 0)
            bundle = [p for p in r.stdout.split() if p.endswith(".so")][0]
            asm = [p for p in r.stdout.split() if p.endswith(".s")][0]
            with open(asm) as f:
                test.assertIn(product, f.read())
            for batch, tq, tk in SHAPES:
                test.expect(attnc("verify", bundle, "--batch", batch, "--seq-q", tq,
                                  "--seq-k", tk, "--seed", tq), 0, "PASS")


@needs_backends("mlir")
class DotCode(PairedProducts, CliTestCase):
    TARGET, PRODUCT, WITHOUT = "x86-64-zen4", "vdpbf16ps", "dot=0"
    RUN_TARGET, NEEDS, UNIT = TARGET, ("avx512f", "avx512_bf16"), "AVX512-BF16"
    # The decode kernel's too: an odd last key alone.
    POISONED = PairedProducts.POISONED + ("decode=1", "decode=1,key_block=32")

    def test_bf16_products_are_dot_products_on_zen4(self):
        asm = self.assembly("heads=8 d_k=128 dtype=bf16 mask=causal")
        self.assertIn("vdpbf16ps", asm)
        self.assertNotIn("tdpbf16ps", asm)
        # On an AMX target when the schedule asks for them (and no tiles, whose kernels also
        # take the keys of partial chunks as dot products).
        asm = self.assembly("heads=8 d_k=64 dtype=bf16", target="x86-64-sapphirerapids",
                            schedule="amx=0,dot=1")
        self.assertIn("vdpbf16ps", asm)
        self.assertNotIn("tdpbf16ps", asm)

    def test_backward_products_are_dot_products_in_both_families(self):
        # The backward has no AMX tiles: its products are vdpbf16ps on an AMX target too, apart
        # from the forward's (backward_dot), whose products the schedules here widen.
        spec = "heads=4 kv_heads=2 d_k=64 dtype=bf16 mask=causal lse=true backward=true"
        for target, forward in (("x86-64-zen4", "dot=0"), ("x86-64-sapphirerapids", "amx=0")):
            with self.subTest(target=target):
                self.assertIn("vdpbf16ps", self.assembly(spec, target, forward))
                self.assertNotIn("vdpbf16ps",
                                 self.assembly(spec, target, forward + ",backward_dot=0"))
        self.expect(attnc("compile", "heads=8 d_k=80 dtype=bf16 lse=true backward=true",
                          "--backend", "mlir", "--target", "x86-64-zen4", "--schedule",
                          "backward_dot=1", "-o", self.tmp), 2,
                    "backward_dot=1 needs the x86-avx512-bf16 or x86-amx family", "x86-avx512")

    def test_dot_schedule_outside_the_families_is_refused(self):
        self.expect(attnc("compile", "heads=8 d_k=128 dtype=bf16", "--backend", "mlir",
                          "--target", "x86-64-avx512", "--schedule", "dot=1", "-o", self.tmp), 2,
                    "dot=1 needs the x86-avx512-bf16 or x86-amx family", "x86-avx512")
        self.expect(attnc("compile", "heads=8 d_k=128 dtype=bf16", "--backend", "mlir",
                          "--target", "x86-64-sapphirerapids", "--schedule", "dot=1", "-o",
                          self.tmp), 2, "amx=1 and dot=1")
        self.expect(attnc("compile", "heads=8 d_k=128 dtype=bf16", "--backend", "mlir",
                          "--target", "x86-64-zen4", "--schedule", "key_block=16", "-o",
                          self.tmp), 2, "dot=1 needs query_tile a multiple of 16, key_block a "
                    "multiple of 32")


    def test_fat_bundle_member_for_zen4(self):
        # The Zen 4 member takes dot products and needs AVX512-BF16, not AMX; the runtime ranks
        # it before the AVX-512 member, and each verifies when it is told to run it.
        bundle, order, members = self.fat_bundle()
        self.assertEqual(order, ["x86-64-zen4", "x86-64-avx512"])
        self.assertIn("avx512_bf16", members["x86-64-zen4"])
        self.assertNotIn("amx_tile", members["x86-64-zen4"])
        self.skip_unless_the_cpu_has_them()
        for name in members:
            for tq in ("70", "3"):
                self.expect(attnc("verify", bundle, "--batch", "2", "--seq-q", tq, "--seq-k",
                                  "45", env={"ATTNC_TARGET": name}), 0, "PASS")

    def test_decode_numerics_against_the_reference(self):
        # The decode kernel alone (decode=1), so that every shape runs it.
        for spec in DECODE_CASES:
            with self.subTest(spec=spec):
                self.assertIn("vdpbf16ps", self.assembly(spec, schedule="decode=1"))
        self.skip_unless_the_cpu_has_them()
        for spec in DECODE_CASES:
            with self.subTest(spec=spec):
                out = os.path.join(self.tmp, str(abs(hash(spec))))
                r = self.expect(attnc("compile", spec, "--backend", "mlir", "--target",
                                      self.TARGET, "--schedule", "decode=1", "-o", out), 0)
                for batch, tq, tk in DECODE_SHAPES:
                    self.expect(attnc("verify", r.stdout.split()[0], "--batch", batch, "--seq-q",
                                      tq, "--seq-k", tk, "--seed", tk), 0, "PASS")


if __name__ == "__main__":
    unittest.main()
