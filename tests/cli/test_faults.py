"""Faults of the machine, not of the request: a disk that fills up under a compile or a tune.
attnc then exits 75 (the machine failed) with the system's reason and leaves nothing behind,
whichever write the disk refuses, and a tune records nothing of the trial it could not measure.

The small disk is a tmpfs mounted in a private mount namespace (unshare --mount, with
--map-root-user where the tests do not run as root), which ends with the command; TMPDIR points
at it. Where no such namespace can be made the tests say why and skip."""
import functools
import json
import os
import sqlite3
import subprocess
import tempfile
import unittest

from common import ATTNC, BUILT_BACKENDS, CliTestCase, attnc, needs_backends

DISK_KIB = 32 * 1024  # the tmpfs; a filler leaves the free space each run asks for

# Mounts the tmpfs at $1, fills it but for $2 KiB, runs the rest with TMPDIR there, then writes
# what the command left on the disk (path and size, the filler aside) to $3.
RUN_ON_DISK = r'''
disk=$1 free=$2 listing=$3; shift 3
mount -t tmpfs -o size=%dk tmpfs "$disk" || exit 97
head -c $(( (%d - free) * 1024 )) /dev/zero > "$disk/.filler"
TMPDIR=$disk "$@"
code=$?
find "$disk" -mindepth 1 ! -name .filler -printf '%%P %%s\n' | sort > "$listing"
exit $code
''' % (DISK_KIB, DISK_KIB)


def unshare():
    return ["unshare", "--mount"] + ([] if os.geteuid() == 0 else ["--map-root-user"])


@functools.lru_cache(maxsize=None)
def no_private_disk():
    """Why no tmpfs can be mounted in a private namespace here, or None."""
    probe = tempfile.mkdtemp(prefix="attnc_faults_probe_")
    try:
        r = subprocess.run(unshare() + ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs",
                                        probe], capture_output=True, text=True, timeout=60)
    except OSError as e:
        return "unshare cannot run: %s" % e
    finally:
        os.rmdir(probe)
    if r.returncode != 0:
        return "no private mount namespace with a tmpfs here (unshare: %s)" % r.stderr.strip()
    return None


class SmallDisk(CliTestCase):
    def setUp(self):
        reason = no_private_disk()
        if reason:
            self.skipTest(reason)
        super().setUp()
        self.disk = os.path.join(self.tmp, "disk")
        os.mkdir(self.disk)

    def on_disk(self, free_kib, *args):
        """attnc args with TMPDIR on a disk with free_kib KiB free (its path is self.disk):
        the result, and {path: size} of what stayed on the disk."""
        listing = os.path.join(self.tmp, "listing")
        result = subprocess.run(unshare() + ["sh", "-c", RUN_ON_DISK, "sh", self.disk,
                                             str(free_kib), listing, ATTNC, *args],
                                capture_output=True, text=True, timeout=600)
        self.assertNotEqual(result.returncode, 97, result.stderr)  # the mount itself failed
        with open(listing) as f:
            left = dict(line.rsplit(" ", 1) for line in f.read().splitlines())
        return result, left

    def refused_or_whole(self, args, frees):
        """With each free space, args either writes exactly what it writes on a roomy disk,
        or exits 75 naming the full disk and leaves nothing; the smallest must fail."""
        roomy, whole = self.on_disk(DISK_KIB, *args)
        self.expect(roomy, 0)
        self.assertTrue(whole)
        for free in frees:
            result, left = self.on_disk(free, *args)
            if result.returncode == 0 and free > 0:
                self.assertEqual(left, whole, "%d KiB free" % free)  # nothing cut short
                continue
            self.expect(result, 75, "the machine failed", "No space left on device")
            self.assertEqual(left, {}, "%d KiB free: %s" % (free, result.stderr))


class FullDiskCompile(SmallDisk):
    # Once: Halide aborted (SIGABRT, "LLVM ERROR: IO failure on output stream"), MLIR exited 1,
    # both leaving the -o directory and a .attnc-build-* in it; the reference backend exited 1;
    # a Halide C header was cut short and the compile said nothing (exit 0).
    def out(self):
        return os.path.join(self.disk, "out")

    def test_every_backend_fails_cleanly(self):
        for backend in ("reference", "halide", "mlir"):
            if backend in BUILT_BACKENDS:
                with self.subTest(backend=backend):
                    self.refused_or_whole(["compile", "heads=1 d_k=4", "--backend", backend,
                                           "-o", self.out()], (0, 8, 64, 160, 256))

    @needs_backends("halide")
    def test_halides_own_artifacts(self):
        # The static library is written by LLVM itself; the header by Halide's C++ stream.
        self.refused_or_whole(["compile", "heads=1 d_k=4", "--backend", "halide", "--emit",
                               "a,h", "-o", self.out()], (0, 100, 220))


@needs_backends("halide", "mlir")
class FullDiskTune(SmallDisk):
    def test_a_trial_the_machine_failed_is_not_recorded(self):
        # Once: each trial was recorded as "crash" or "compile_error", and a rerun with room
        # reused those records and still failed.
        db = os.path.join(self.tmp, "tuning.db")  # on the roomy disk
        tune = ["tune", "heads=2 d_k=32", "--trials", "2", "--seq-q", "64", "--runs", "2",
                "--threads", "1", "--db", db]
        # With no room no trial is measured; with 100 KiB an MLIR bundle fits (its trial is a
        # result) and a Halide one does not.
        for free in (0, 100):
            result, left = self.on_disk(free, *tune)
            self.expect(result, 75, "the machine failed", "not for the candidate",
                        "No space left on device")
            self.assertEqual(left, {})
            with sqlite3.connect(db) as c:
                statuses = [r[0] for r in c.execute("SELECT status FROM trials")]
                self.assertEqual(c.execute("SELECT count(*) FROM claims").fetchone()[0], 0)
            self.assertEqual(statuses, ["ok"] * len(statuses))
        self.assertLess(len(statuses), 2)
        trials = [json.loads(line) for line in self.expect(attnc(*tune), 0).stdout.splitlines()
                  if '"trial"' in line]
        self.assertEqual([t["status"] for t in trials], ["ok"] * 2)
        self.assertEqual(sum(t["reused"] for t in trials), len(statuses))

    def test_a_database_on_a_full_disk_is_the_machines_failure(self):
        # Once: exit 1, "failed", as if the database or the request were at fault.
        db = os.path.join(self.disk, "tuning.db")
        tune = ["tune", "heads=2 d_k=32", "--trials", "1", "--seq-q", "64", "--runs", "2",
                "--threads", "1", "--db", db]
        result, _ = self.on_disk(0, *tune)
        self.expect(result, 75, "the machine failed", "tuning database", "disk")


if __name__ == "__main__":
    unittest.main()
