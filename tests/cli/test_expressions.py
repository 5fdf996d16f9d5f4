"""The differential test of expressions: seeded random specs with score_mod and mask_mod
(expression_generator.py), each compiled by every CPU code generator that covers it and checked
by `attnc verify` against the f64 reference on odd shapes; a backend that does not cover a spec
must refuse it with exit 2 and the capability table's reason. A third of the specs that read
f32 aux tensors run with NaN and ±inf among their elements, and a spec holding a literal past
every kernel type must be refused for it by every backend.

ATTNC_EXPRESSION_SPECS sets how many specs (120 by default: about 200 expressions, each spec
carrying a score_mod, a mask_mod or both) and ATTNC_EXPRESSION_SEED the seed (1), so a longer
run is `ATTNC_EXPRESSION_SPECS=2000 ctest -R cli.expressions`; a failure names its spec, which
reproduces it alone."""
import concurrent.futures
import math
import os
import tempfile
import unittest

from common import BUILT_BACKENDS, attnc, verdicts, write_npy
from expression_generator import AUX_TENSORS, ExpressionGenerator

# Odd shapes: Tq != Tk both ways, decode (Tq = 1), batches, and a long one where the Halide
# kernel's tile classifier rules key blocks in and out.
SHAPES = [("2", "13", "29"), ("1", "1", "33"), ("2", "41", "7"), ("1", "97", "203")]

CODE_GENERATORS = [b for b in BUILT_BACKENDS if b != "reference"]

# The elements of an aux tensor read with special values: NaN and ±inf among finite ones.
SPECIAL_ELEMENTS = [0.5, float("nan"), -1.25, float("inf"), 2.0, float("-inf"), -0.75, 1.5]


def special_aux_params(case, sizes, directory):
    """--param arguments giving each of the case's special aux tensors as a file."""
    args = []
    for name, _, dims in AUX_TENSORS:
        if name in case.special_aux:
            shape = [sizes[d] if d in sizes else int(d) for d in dims]
            count = math.prod(shape)
            path = os.path.join(directory, "%s_%s.npy" % (name, "x".join(map(str, shape))))
            write_npy(path, [SPECIAL_ELEMENTS[e % len(SPECIAL_ELEMENTS)] for e in range(count)],
                      shape)
            args += ["--param", "%s=%s" % (name, path)]
    return args


def check_refusal(case, backend, directory):
    """None when compiling refuses the case for its literal past every kernel type (exit 2,
    naming it) and writes nothing; else what went wrong."""
    r = attnc("compile", case.spec, "--backend", backend, "-o", directory)
    if r.returncode != 2 or "'%s'" % case.refused_literal not in r.stderr:
        return "expected exit 2 naming %s, got %d: %s" % (case.refused_literal, r.returncode,
                                                          r.stderr)
    if os.path.exists(directory):
        return "a refused compile left %s" % directory
    return None


def check(case, backend, directory):
    """None when `backend` compiles the case and every shape verifies, or refuses it as the
    capability table says; else what went wrong."""
    if case.refused_literal:
        return check_refusal(case, backend, directory)
    reason = verdicts(case.spec)[backend]
    r = attnc("compile", case.spec, "--backend", backend, "-o", directory)
    if reason:
        if r.returncode != 2 or reason not in r.stderr:
            return "expected exit 2 with %r, got %d: %s" % (reason, r.returncode, r.stderr)
        return None
    if r.returncode != 0:
        return "compile exited %d: %s" % (r.returncode, r.stderr)
    bundle = r.stdout.strip()
    for batch, tq, tk in SHAPES:
        sizes = {"B": int(batch), "Tq": int(tq), "Tk": int(tk), "heads": case.heads,
                 "kv_heads": case.kv_heads}
        v = attnc("verify", bundle, "--batch", batch, "--seq-q", tq, "--seq-k", tk, "--seed", tk,
                  *special_aux_params(case, sizes, directory))
        if v.returncode != 0:
            return "verify B=%s Tq=%s Tk=%s%s exited %d:\n%s%s" % (
                batch, tq, tk, " (NaN and ±inf in %s)" % ", ".join(case.special_aux)
                if case.special_aux else "", v.returncode, v.stdout, v.stderr)
    return None


@unittest.skipUnless(CODE_GENERATORS, "attnc was built without a code generator")
class RandomExpressions(unittest.TestCase):
    def test_random_expressions_match_the_reference(self):
        count = int(os.environ.get("ATTNC_EXPRESSION_SPECS", "120"))
        seed = int(os.environ.get("ATTNC_EXPRESSION_SEED", "1"))
        generator = ExpressionGenerator(seed)
        cases = [generator.case() for _ in range(count)]
        with tempfile.TemporaryDirectory(prefix="attnc_expressions_") as tmp:
            jobs = [(case, backend, "%s/%d_%s" % (tmp, n, backend))
                    for n, case in enumerate(cases) for backend in CODE_GENERATORS]
            # Two at a time: the machines have two cores, and compiling dominates.
            with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
                outcomes = list(pool.map(lambda job: check(*job), jobs))
        failures = ["%s [%s]: %s" % (case.spec, backend, outcome)
                    for (case, backend, _), outcome in zip(jobs, outcomes) if outcome]
        self.assertFalse(failures, "%d of %d checks failed (seed %d):\n\n%s" % (
            len(failures), len(jobs), seed, "\n\n".join(failures[:10])))


if __name__ == "__main__":
    unittest.main()
