"""examples/c_api/run_sdpa: a C program running a bundle through the runtime's C API."""
import os
import subprocess
import unittest

from common import CliTestCase

RUN_SDPA = os.environ.get("RUN_SDPA", "run_sdpa")


class CExample(CliTestCase):
    def test_runs_a_bundle_from_c(self):
        bundle = self.compile("variant=sdpa heads=4 d_k=32 mask=causal")
        r = subprocess.run([RUN_SDPA, bundle], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("checksum", r.stdout)
        self.assertNotIn("nan", r.stdout)

    def test_reports_a_mismatched_bundle(self):
        bundle = self.compile("variant=sdpa heads=2 d_k=32")  # the example passes 4 heads
        r = subprocess.run([RUN_SDPA, bundle], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("tensor mismatch", r.stderr)


if __name__ == "__main__":
    unittest.main()
