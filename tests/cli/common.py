"""Helpers for the CLI tests: run attnc, check exit codes and messages, write .npy files."""
import functools
import json
import os
import struct
import subprocess
import tempfile
import unittest

ATTNC = os.environ.get("ATTNC", "attnc")


def _registered_backends():
    r = subprocess.run([ATTNC, "backends", "--json"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError("attnc backends --json failed: " + r.stderr)
    return [b["name"] for b in json.loads(r.stdout)["backends"]]


# The backends this build of attnc registers (attnc backends), fastest first; the sanitizer
# build (scripts/test-sanitized) has only the reference backend, and tests of the others are
# reported as skipped there.
BUILT_BACKENDS = _registered_backends()


def needs_backends(*backends):
    """Skips a test or class unless attnc was built with every one of `backends`."""
    missing = [b for b in backends if b not in BUILT_BACKENDS]
    return unittest.skipIf(missing, "attnc was built without the %s backend" % " and ".join(missing))


@functools.lru_cache(maxsize=None)
def verdicts(spec, target="host"):
    """attnc backends --spec: for each built backend, None when it builds `spec` for `target`,
    else its reason (the capability table's gap, as compile reports it)."""
    r = attnc("backends", "--spec", spec, "--target", target, "--json")
    if r.returncode != 0:
        raise AssertionError("attnc backends --spec %r failed: %s" % (spec, r.stderr))
    return {b["name"]: b.get("reason") for b in json.loads(r.stdout)["backends"]}


def attnc(*args, env=None, timeout=300):
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([ATTNC, *args], capture_output=True, text=True, env=full_env,
                          timeout=timeout)


def host_flags():
    """This CPU's feature flags as /proc/cpuinfo lists them."""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def write_npy(path, values, shape, descr="<f4"):
    """A minimal .npy writer (no numpy on the test machines)."""
    fmt = {"<f4": "f", "<f8": "d", "<i4": "i", "|u1": "B"}[descr]
    dims = ",".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%d%s" % (len(values), fmt), *values))


def read_npy(path):
    """Returns (descr, shape, values) of a little-endian C-order .npy."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:6] == b"\x93NUMPY", path
    length = struct.unpack("<H", data[8:10])[0]
    header = eval(data[10:10 + length].decode())  # a Python dict literal by definition
    fmt = {"<f4": "f", "<f8": "d", "<i4": "i", "|u1": "B", "<f2": "e"}[header["descr"]]
    count = 1
    for d in header["shape"]:
        count *= d
    body = data[10 + length:]
    return header["descr"], header["shape"], list(struct.unpack("<%d%s" % (count, fmt), body))


class CliTestCase(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="attnc_cli_")
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def expect(self, result, code, *mentions):
        """Exit code `code`, and every mention in stdout or stderr."""
        output = result.stdout + result.stderr
        self.assertEqual(result.returncode, code, output)
        for mention in mentions:
            self.assertIn(mention, output)
        return result

    def compile(self, spec, out=None):
        out = out or os.path.join(self.tmp, "out")
        result = self.expect(attnc("compile", spec, "--backend", "reference", "-o", out), 0)
        bundle = result.stdout.strip()
        self.assertTrue(os.path.isfile(bundle), bundle)
        return bundle
