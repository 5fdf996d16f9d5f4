"""Expressions at the edges of their types, each compiled by every CPU code generator and checked
by `attnc verify` against the f64 reference (docs/spec.md, Expressions and Special values), NaN
positions included: negative ints as scores, NaN and infinities made inside an expression or
read from an aux tensor, exp and floor past f32's and int32's range, ints that can leave 32 bits,
scores far from zero. Each case is a defect once found (issue 52); random specs
(test_expressions.py) keep to values that f32 and f64 compute alike, so they cannot reach these.
"""
import os
import unittest

from common import BUILT_BACKENDS, CliTestCase, attnc, verdicts, write_npy

CODE_GENERATORS = [b for b in BUILT_BACKENDS if b != "reference"]

# (B, Tq, Tk): off every tile, Tq != Tk both ways, a decoding row.
SHAPES = [(2, 7, 63), (3, 100, 37), (2, 41, 7), (1, 1, 33)]

NAN, INF = float("nan"), float("inf")

# An f32 [Tk] aux tensor `x` whose keys cycle through values no finite arithmetic makes.
SPECIAL_KEYS = [1.5, NAN, -INF, 0.25, INF, 3e9, -2.0]


def special_keys(tk):
    return [SPECIAL_KEYS[j % len(SPECIAL_KEYS)] for j in range(tk)]


def finite_keys(tk):
    """+inf and -inf beside finite values (no NaN): a mask may multiply them by zero."""
    return [(INF, -INF, 0.5, 2.0)[j % 4] for j in range(tk)]


def nan_among_fives(tk):
    """NaN beside finite values that all fail the mask: fmin and fmax turn the NaN into a key
    kept."""
    return [NAN if j % 7 == 0 else 5.0 for j in range(tk)]


X = 'aux="x:f32[Tk]"'


def near_seven_tenths(tk):
    """0.7 and its f32 neighbours (.npy stores f32): 0.7 in f64 lies above the first."""
    return [(0.7, 0.70000005, 0.69999993, 0.3)[j % 4] for j in range(tk)]

CASES = [
    # The value of a score_mod is a score (f32) whatever its type: ints, negative ones included.
    ("negative int score", 'score_mod="kv_idx - qpos"', None),
    ("int literal score", 'score_mod="-1"', None),
    ("negated index", 'score_mod="-kv_idx"', None),
    ("floor of the score", 'score_mod="floor(score)"', None),
    ("int where", 'score_mod="where(kv_idx < 3, 1, -1)"', None),
    ("int aux score", 'aux="t:i32[heads,Tk]" score_mod="t[h, kv_idx] - 4"', None),
    # NaN and infinities made inside an expression are values, not impossibilities.
    ("log of a negative", 'score_mod="score + log(-1.0)"', None),
    ("exp past f32", 'score_mod="score + exp(1000.0)"', None),
    ("exp of NaN", 'score_mod="exp(log(-1.0))"', None),
    ("sigmoid of NaN", 'score_mod="sigmoid(log(-1.0))"', None),
    ("exp of a huge argument", 'score_mod="sigmoid(score * 1e30)"', None),
    ("min ignores NaN", X + ' score_mod="min(score, x[kv_idx])"', special_keys),
    ("max ignores NaN", X + ' score_mod="max(score, x[kv_idx] * 0.0)"', special_keys),
    ("NaN is not itself", X + ' mask_mod="x[kv_idx] == x[kv_idx]"', special_keys),
    ("floor saturates", X + ' mask_mod="floor(x[kv_idx]) > 0"', special_keys),
    ("inf times zero", X + ' mask_mod="x[kv_idx] * 0.0 == 0.0"', finite_keys),
    ("inf minus inf", X + ' score_mod="score + (x[kv_idx] - x[kv_idx])"', finite_keys),
    # The same in masks, whose bounds over a block of keys decide which blocks are skipped.
    ("inf plus -inf in a mask", X + ' mask_mod="x[kv_idx] + x[0] == x[0]"', finite_keys),
    ("inf minus inf in a mask", X + ' mask_mod="x[kv_idx] - x[0] == -x[0]"', finite_keys),
    ("min of NaN in a mask", X + ' mask_mod="min(x[kv_idx], 10.0) > 6.0"', nan_among_fives),
    ("max of NaN in a mask", X + ' mask_mod="max(x[kv_idx], 0.0) < 1.0"', nan_among_fives),
    ("a mask over NaN alone", X + ' mask_mod="min(x[kv_idx], 3.0) == 3.0"',
     lambda tk: [NAN] * tk),
    ("weights of a NaN score", 'weights=true score_mod="log(-1.0)"', None),
    ("NaN rows stored as f16", 'dtype=f16 score_mod="where(q_idx < 3, log(-1.0), score)"', None),
    # IEEE's division by zero, signed zeros, and abs of NaN (Halide refused 0.0 / 0.0 under abs,
    # took -(0.0) as +0, and folded a constant NaN's log to a number).
    ("0 / 0 under abs and log", 'params="m=0" score_mod="max(score, log(abs(m / 0) + 1))"', None),
    ("division by -0", 'score_mod="where(kv_idx < 2, 1.0 / -0.0, score)"', None),
    ("log of a quotient by 0", 'score_mod="max(score, log(kv_idx / 0))"', None),
    # Infinities in parts Halide lifts out of the expression (loop invariants), which LLVM once
    # compiled as if no infinity existed.
    ("a lifted infinity", 'score_mod="max(score, min(exp(1000.0) + h, 5.0))"', None),
    ("a lifted infinity in a mask", X + ' mask_mod="1e30 * 1e30 * b <= x[kv_idx]"',
     special_keys),
    # Int constants at int32's limits, beside the kernels' tile offsets (Halide refused to fold
    # them: "signed integer overflow").
    ("comparisons at int32's limits",
     'mask_mod="(q_idx <= 2147483600 && qpos > (-2147483647 - 1)) || kv_idx == 0"', None),
    ("clamp at int32's limits", 'mask_mod="clamp(qpos, -2147483647, 2147483647) == qpos"', None),
    ("a wrapped constant in a mask", 'mask_mod="2147483647 * 2147483647 * 2147483647 != kv_idx"',
     None),
    # Float constants are f32s, as kernels hold them, and values past f32's range are ±inf
    # mid-expression too.
    ("a literal as an f32", X + ' mask_mod="x[kv_idx] >= 0.7"', near_seven_tenths),
    ("a param as an f32", X + ' params="t=0.7" mask_mod="x[kv_idx] <= t"', near_seven_tenths),
    ("exp past f32 times zero", 'score_mod="score + exp(100.0) * 0.0"', None),
    ("a quotient past f32", 'score_mod="score + 1.0 / (1e-30 * 1e-30) * 0.0"', None),
    # A score read only under a condition on b or h past B or heads (Halide's bounds asked for
    # q's batch entries [6, 1]).
    ("scores read where b > 5", 'score_mod="where(b > 5 || h > 3, score, 0.5)"', None),
    # Scores far from zero: softmax ignores a constant shift, and a row whose every key scores
    # -1e30 is still a weighted mean.
    ("huge shift", 'score_mod="score - 1e20"', None),
    ("huge negative scores", 'score_mod="where(kv_idx <= qpos, score, -1e30)"', None),
    # Their weights are e^(s - m) / L, not e^(s - lse): lse = m + log L rounds to m there. A
    # sink joins m and L (at +1e20 the scores outweigh it).
    ("weights at a huge shift", 'weights=true score_mod="score - 1e20"', None),
    ("weights of huge negative scores",
     'weights=true score_mod="where(kv_idx <= qpos, score, -1e30)"', None),
    ("weights beside a sink", 'weights=true sinks=true score_mod="score + 1e20"', None),
]


def verify(test, bundle, keys):
    for batch, tq, tk in SHAPES:
        args = ["verify", bundle, "--batch", str(batch), "--seq-q", str(tq), "--seq-k", str(tk),
                "--seed", str(tk)]
        if keys:
            path = os.path.join(test.tmp, "x%d.npy" % tk)
            write_npy(path, keys(tk), [tk])
            args += ["--param", "x=" + path]
        with test.subTest(shape=(batch, tq, tk)):
            test.expect(attnc(*args), 0, "PASS")


@unittest.skipUnless(CODE_GENERATORS, "attnc was built without a code generator")
class ExpressionEdges(CliTestCase):
    def test_every_backend_agrees_with_the_reference(self):
        for n, (name, expressions, keys) in enumerate(CASES):
            spec = "heads=2 d_k=16 lse=true " + expressions
            for backend in CODE_GENERATORS:
                with self.subTest(case=name, backend=backend):
                    self.assertIsNone(verdicts(spec)[backend])
                    out = os.path.join(self.tmp, "%s_%d" % (backend, n))
                    bundle = self.expect(attnc("compile", spec, "--backend", backend, "-o", out),
                                         0).stdout.strip()
                    verify(self, bundle, keys)

    def test_every_variant_reads_scores_under_a_condition_on_b_or_h(self):
        # Halide bounds a read under a select by its condition: where(b > 5, ...) at B 2 asked
        # mha's q for batch entries [6, 1], and where(h > 5, ...) at 2 heads asked the
        # projections' weights for heads [6, 1].
        for variant in ["variant=mha kv_heads=1 pe=sinusoidal", "variant=bilinear d_q=8",
                        "variant=additive d_attn=8"]:
            for condition in ["b > 5", "h > 5"]:
                spec = 'heads=2 d_k=8 %s score_mod="where(%s, score, 0.5)"' % (variant, condition)
                for backend in CODE_GENERATORS:
                    with self.subTest(spec=spec, backend=backend):
                        if verdicts(spec)[backend] is not None:
                            continue
                        out = os.path.join(self.tmp, "%s_%s_%s" % (
                            backend, variant.split()[0][8:], condition[0]))
                        bundle = self.expect(attnc("compile", spec, "--backend", backend, "-o",
                                                   out), 0).stdout.strip()
                        verify(self, bundle, None)

    def test_ints_that_may_leave_32_bits_compile(self):
        # The language leaves ints past 32 bits unspecified, so a kernel may compute anything
        # there, but a spec the parser accepts compiles on every backend; at Tk = 1 no product
        # leaves 32 bits and every backend agrees.
        spec = ('heads=2 d_k=16 aux="x:f32[Tk]" '
                'score_mod="score + x[clamp(kv_idx * 2147483647, 0, Tk - 1)]"')
        for backend in CODE_GENERATORS:
            with self.subTest(backend=backend):
                out = os.path.join(self.tmp, backend + "_wide")
                bundle = self.expect(attnc("compile", spec, "--backend", backend, "-o", out),
                                     0).stdout.strip()
                self.expect(attnc("verify", bundle, "--seq-q", "5", "--seq-k", "1"), 0, "PASS")

    def test_masks_reading_many_aux_elements_compile(self):
        # Halide once inlined the tile classifier's bounds of every aux read into the block
        # loop's predicate, which its bounds inference solved again for every box: 10 reads
        # took 13 s to compile, 40 took 268 s. The reads' classes are now a per-task table.
        reads = " || ".join("t[clamp(kv_idx + %d, 0, Tk - 1)] == %d" % (i, i) for i in range(40))
        spec = 'heads=2 d_k=16 aux="t:i32[Tk]" mask_mod="kv_idx <= qpos && (%s)"' % reads
        for backend in CODE_GENERATORS:
            with self.subTest(backend=backend):
                out = os.path.join(self.tmp, backend + "_reads")
                bundle = self.expect(attnc("compile", spec, "--backend", backend, "-o", out,
                                           timeout=150), 0).stdout.strip()
                self.expect(attnc("verify", bundle, "--batch", "2", "--seq-q", "37",
                                  "--seq-k", "53"), 0, "PASS")


if __name__ == "__main__":
    unittest.main()
