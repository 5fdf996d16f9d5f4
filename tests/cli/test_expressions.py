"""The differential test of expressions: seeded random specs with score_mod and mask_mod
(expression_generator.py), each compiled by every CPU code generator that covers it and checked
by `attnc verify` against the f64 reference on odd shapes; a backend that does not cover a spec
must refuse it with exit 2 and the capability table's reason.

ATTNC_EXPRESSION_SPECS sets how many specs (120 by default: about 200 expressions, each spec
carrying a score_mod, a mask_mod or both) and ATTNC_EXPRESSION_SEED the seed (1), so a longer
run is `ATTNC_EXPRESSION_SPECS=2000 ctest -R cli.expressions`; a failure names its spec, which
reproduces it alone."""
import concurrent.futures
import os
import tempfile
import unittest

from common import BUILT_BACKENDS, attnc, verdicts
from expression_generator import ExpressionGenerator

# Odd shapes: Tq != Tk both ways, decode (Tq = 1), batches, and a long one where the Halide
# kernel's tile classifier rules key blocks in and out.
SHAPES = [("2", "13", "29"), ("1", "1", "33"), ("2", "41", "7"), ("1", "97", "203")]

CODE_GENERATORS = [b for b in BUILT_BACKENDS if b != "reference"]


def check(spec, backend, directory):
    """None when `backend` compiles `spec` and every shape verifies, or refuses it as the
    capability table says; else what went wrong."""
    reason = verdicts(spec)[backend]
    r = attnc("compile", spec, "--backend", backend, "-o", directory)
    if reason:
        if r.returncode != 2 or reason not in r.stderr:
            return "expected exit 2 with %r, got %d: %s" % (reason, r.returncode, r.stderr)
        return None
    if r.returncode != 0:
        return "compile exited %d: %s" % (r.returncode, r.stderr)
    bundle = r.stdout.strip()
    for batch, tq, tk in SHAPES:
        v = attnc("verify", bundle, "--batch", batch, "--seq-q", tq, "--seq-k", tk, "--seed", tk)
        if v.returncode != 0:
            return "verify B=%s Tq=%s Tk=%s exited %d:\n%s%s" % (batch, tq, tk, v.returncode,
                                                                 v.stdout, v.stderr)
    return None


@unittest.skipUnless(CODE_GENERATORS, "attnc was built without a code generator")
class RandomExpressions(unittest.TestCase):
    def test_random_expressions_match_the_reference(self):
        count = int(os.environ.get("ATTNC_EXPRESSION_SPECS", "120"))
        seed = int(os.environ.get("ATTNC_EXPRESSION_SEED", "1"))
        generator = ExpressionGenerator(seed)
        specs = [generator.spec() for _ in range(count)]
        with tempfile.TemporaryDirectory(prefix="attnc_expressions_") as tmp:
            jobs = [(spec, backend, "%s/%d_%s" % (tmp, n, backend))
                    for n, spec in enumerate(specs) for backend in CODE_GENERATORS]
            # Two at a time: the machines have two cores, and compiling dominates.
            with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
                outcomes = list(pool.map(lambda job: check(*job), jobs))
        failures = ["%s [%s]: %s" % (spec, backend, outcome)
                    for (spec, backend, _), outcome in zip(jobs, outcomes) if outcome]
        self.assertFalse(failures, "%d of %d checks failed (seed %d):\n\n%s" % (
            len(failures), len(jobs), seed, "\n\n".join(failures[:10])))


if __name__ == "__main__":
    unittest.main()
