"""attnc tune: trials recorded, resumed, interrupted, sharded and merged; the database's errors;
and compile taking the tuned schedule."""
import collections
import glob
import json
import os
import re
import signal
import sqlite3
import subprocess
import xml.etree.ElementTree as ET

from common import ATTNC, CliTestCase, attnc, needs_backends

SPEC = "heads=2 d_k=32 mask=causal"
# Tiny timings: the tests check the bookkeeping, not the speed.
FAST = ["--seq-q", "64", "--runs", "2", "--threads", "1"]


def events(stdout):
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def manifest_in(out):
    return json.loads(read(glob.glob(os.path.join(out, "*.json"))[0]))


def long_schedule(manifest):
    """The schedule of the kernel for long queries: an MLIR bundle holds the decode kernel for
    Tq <= 16 beside it (a shape-dispatch bundle), a Halide one that kernel alone."""
    schedule = manifest["schedule"]
    if "shape_dispatch" not in schedule:
        return schedule
    buckets = schedule["shape_dispatch"]
    decode = [b for b in buckets if b["seq_q"] == [1, 16]]
    assert len(decode) == 1 and decode[0]["schedule"]["params"]["decode"] == 1, buckets
    longer = [b for b in buckets if b["seq_q"][0] > 16]
    assert len(longer) == 1, buckets
    return longer[0]["schedule"]


def trial_count(db):
    with sqlite3.connect(db) as c:
        return c.execute("SELECT count(*) FROM trials").fetchone()[0]


@needs_backends("halide", "mlir")
class Tune(CliTestCase):
    def setUp(self):
        super().setUp()
        self.db = os.path.join(self.tmp, "tuning.db")

    def tune(self, *args, code=0, env=None):
        return self.expect(attnc("tune", *args, "--db", self.db, env=env), code)

    def test_runs_resumes_and_compile_uses_the_best(self):
        first = events(self.tune(SPEC, "--trials", "4", *FAST).stdout)
        self.assertEqual(first[0]["event"], "start")
        trials = [e for e in first if e["event"] == "trial"]
        self.assertEqual(len(trials), 4)
        # Each backend's default goes first, in the registry's order (attnc backends), and every
        # trial was verified before it was timed.
        self.assertTrue(trials[0]["candidate"].startswith("mlir"))
        self.assertTrue(trials[1]["candidate"].startswith("halide"))
        for t in trials:
            self.assertEqual(t["status"], "ok", t)
            self.assertIn("verified at B=2 Tq=37 Tk=53", t["detail"])
        self.assertEqual(first[-1]["stopped"], "trials")
        self.assertEqual(trial_count(self.db), 4)

        # The same command with a larger budget continues: the four earlier trials are reused in
        # order, and the new ones are what a fresh search with the same seed proposes (the
        # random warm start does not depend on the timings).
        resumed = [e for e in events(self.tune(SPEC, "--trials", "6", *FAST).stdout)
                   if e["event"] == "trial"]
        self.assertEqual([e["reused"] for e in resumed], [True] * 4 + [False] * 2)
        self.assertEqual([e["candidate"] for e in resumed[:4]], [t["candidate"] for t in trials])
        fresh_db = os.path.join(self.tmp, "fresh.db")
        fresh = [e for e in events(self.expect(attnc("tune", SPEC, "--trials", "6", *FAST,
                                                     "--db", fresh_db), 0).stdout)
                 if e["event"] == "trial"]
        self.assertEqual([e["candidate"] for e in fresh], [e["candidate"] for e in resumed])
        self.assertEqual(trial_count(self.db), 6)

        # compile --backend auto takes the fastest trial and names it in the manifest.
        best = min((e for e in resumed if e["median_ms"] is not None),
                   key=lambda e: e["median_ms"])
        env = {"ATTNC_TUNING_DB": self.db, "ATTNC_SYSTEM_TUNING_DB": ""}
        out = os.path.join(self.tmp, "tuned")
        self.expect(attnc("compile", SPEC, "--backend", "auto", "-o", out, env=env), 0)
        manifest = manifest_in(out)
        backend, *items = best["candidate"].split()
        self.assertEqual(manifest["backend"], backend)
        tuned = long_schedule(manifest)
        self.assertEqual(tuned["params"], {k: int(v) for k, v in (i.split("=") for i in items)})
        self.assertTrue(tuned["provenance"].startswith("tuned: trial "))
        with sqlite3.connect(self.db) as c:
            uids = [r[0] for r in c.execute("SELECT uid FROM trials")]
        self.assertIn(tuned["provenance"].split()[2], uids)
        # --no-tuning keeps the default; another shape bucket has no record.
        for flags in (["--no-tuning"], ["--tuned-for", "4096"]):
            out = os.path.join(self.tmp, "default" + flags[0])
            self.expect(attnc("compile", SPEC, "--backend", "mlir", *flags, "-o", out, env=env), 0)
            self.assertFalse(long_schedule(manifest_in(out))["provenance"].startswith("tuned"),
                             flags)

    def test_a_backward_spec_tunes_the_training_step(self):
        # Its trials verify the gradients too, time the forward and the backward entry and
        # search the backward's key blocks; compile takes the best for that spec only, not for
        # the forward alone (whose trials time the forward alone).
        spec = "heads=2 d_k=32 mask=causal lse=true backward=true"
        run = events(self.tune(spec, "--trials", "5", "--backend", "mlir", *FAST).stdout)
        self.assertEqual(run[0]["timed"], "forward+backward")
        trials = [e for e in run if e["event"] == "trial"]
        self.assertEqual(len(trials), 5)
        for t in trials:
            self.assertEqual(t["status"], "ok", t)
            self.assertRegex(t["detail"], r"^verified with its gradients at B=2 Tq=37 Tk=53; "
                             r"forward [0-9.]+ ms, [0-9.]+ GFLOP/s; backward [0-9.]+ ms")
            forward, backward = (float(x) for x in
                                 re.findall(r"(?:forward|backward) ([0-9.]+) ms", t["detail"]))
            self.assertAlmostEqual(t["median_ms"], forward + backward, delta=2e-3)
        blocks = {re.search(r"backward_key_block=(\d+)", t["candidate"]).group(1)
                  for t in trials}
        self.assertGreater(len(blocks), 1, blocks)
        env = {"ATTNC_TUNING_DB": self.db, "ATTNC_SYSTEM_TUNING_DB": ""}
        for compiled, tuned in ((spec, True), ("heads=2 d_k=32 mask=causal lse=true", False)):
            out = os.path.join(self.tmp, str(tuned))
            self.expect(attnc("compile", compiled, "--backend", "mlir", "-o", out, env=env), 0)
            provenance = long_schedule(manifest_in(out))["provenance"]
            self.assertEqual(provenance.startswith("tuned: trial "), tuned, provenance)
        self.assertEqual(events(self.tune(SPEC, "--trials", "1", *FAST).stdout)[0]["timed"],
                         "forward")

    def test_tuned_shape_buckets_share_one_bundle(self):
        # Two buckets: Tq = Tk = 64 (both backends' defaults) and 300 (Halide only).
        self.tune(SPEC, "--trials", "2", *FAST)
        self.tune(SPEC, "--trials", "2", "--seq-q", "300", "--runs", "2", "--threads", "1",
                  "--backend", "halide")
        env = {"ATTNC_TUNING_DB": self.db, "ATTNC_SYSTEM_TUNING_DB": ""}
        out = os.path.join(self.tmp, "shapes")
        self.expect(attnc("compile", SPEC, "--backend", "auto", "-o", out, env=env), 0)
        manifest = manifest_in(out)
        buckets = manifest["schedule"]["shape_dispatch"]
        # With auto's backend's (MLIR's) decode kernel for Tq <= 16, last.
        longest = 2 ** 63 - 1
        self.assertEqual([(b["seq_q"], b["seq_k"]) for b in buckets],
                         [([256, 511], [256, 511]), ([64, 127], [64, 127]),
                          ([1, 16], [1, longest])])
        self.assertEqual(buckets[0]["backend"], "halide")
        for b in buckets[:2]:
            self.assertTrue(b["schedule"]["provenance"].startswith("tuned: trial "))
        self.assertEqual(buckets[2]["schedule"]["params"]["decode"], 1)
        # Each call runs the kernel of its bucket (the nearest one outside them all), and every
        # one is right.
        bundle = glob.glob(os.path.join(out, "*.so"))[0]
        trace = {"ATTNC_TRACE_DISPATCH": "1"}
        for (tq, tk), kernel in (((37, 53), 1), ((300, 270), 0), ((2000, 1500), 0), ((5, 3), 2),
                                 ((17, 3), 1)):
            r = self.expect(attnc("verify", bundle, "--batch", "2", "--seq-q", str(tq),
                                  "--seq-k", str(tk), env=trace), 0, "PASS")
            self.assertIn("Tq=%d Tk=%d runs kernel %d of 3" % (tq, tk, kernel), r.stderr)
        # --tuned-for takes one bucket; other artifacts than a bundle take the longest, and say so.
        one = os.path.join(self.tmp, "one")
        self.expect(attnc("compile", SPEC, "--backend", "auto", "--tuned-for", "64", "-o", one,
                          env=env), 0)
        self.assertIn("of Tq 64-127", long_schedule(manifest_in(one))["provenance"])
        asm = os.path.join(self.tmp, "asm")
        self.expect(attnc("compile", SPEC, "--backend", "halide", "--emit", "so,asm", "-o", asm,
                          env=env), 0, "2 shape buckets are tuned")
        self.assertIn("of Tq 256-511", manifest_in(asm)["schedule"]["provenance"])

    def test_report_tables_and_plot(self):
        tuned = events(self.tune(SPEC, "--trials", "4", *FAST, "--strategy", "random").stdout)
        ok = collections.Counter(e["candidate"].split()[0] for e in tuned
                                 if e["event"] == "trial" and e["status"] == "ok")
        svg = os.path.join(self.tmp, "report.svg")
        r = self.expect(attnc("tune", SPEC, "--seq-q", "64", "--report", svg, "--db", self.db), 0,
                        "| backend | default ms | best ms", "| backend | parameter | value")
        self.assertEqual(r.stdout.count("| ok |"), 1)
        # The table's ok trials per backend, parameter and value: each ok trial once per
        # parameter of its backend.
        per_parameter = collections.Counter()
        table = r.stdout.split("| backend | parameter | value |")[1].split("\n\n")[0]
        for row in table.splitlines()[2:]:
            cells = [c.strip() for c in row.strip("|").split("|")]
            per_parameter[cells[0]] += int(cells[3])
        # cairo writes the plot's text as glyph outlines and its dots as paths, so the dots are
        # counted by colour: each ok trial once in the time-per-trial panel and once per
        # parameter it has, and one per backend in the legend.
        root = ET.fromstring(read(svg))
        fills = collections.Counter()
        for path in root.iter("{http://www.w3.org/2000/svg}path"):
            fill = re.search(r"fill:rgb\(([\d.]+)%,([\d.]+)%,([\d.]+)%\)", path.get("style", ""))
            if fill:
                fills["#%02x%02x%02x" % tuple(round(float(p) * 2.55) for p in fill.groups())] += 1
        for backend, color in (("halide", "#1f77b4"), ("mlir", "#d62728")):
            self.assertGreater(ok[backend], 0, backend)
            self.assertEqual(fills[color], 1 + ok[backend] + per_parameter[backend], backend)
        # A bucket without trials, or a plot that is not SVG: an error and no file.
        missing = os.path.join(self.tmp, "none.svg")
        self.expect(attnc("tune", SPEC, "--seq-q", "4096", "--report", missing, "--db", self.db),
                    2, "no trials for this spec")
        self.assertFalse(os.path.exists(missing))
        self.expect(attnc("tune", SPEC, "--report", "r.png", "--db", self.db), 2, "ending in .svg")

    def test_interrupt_keeps_finished_trials(self):
        p = subprocess.Popen([ATTNC, "tune", SPEC, "--trials", "50", *FAST, "--db", self.db],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = []
        for line in p.stdout:
            seen.append(json.loads(line))
            if seen[-1]["event"] == "trial" and seen[-1]["n"] == 2:
                p.send_signal(signal.SIGTERM)
                break
        rest, _ = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 128 + signal.SIGTERM)  # once 130 for every signal
        done = events(rest)[-1]
        self.assertEqual(done["stopped"], "interrupted")
        # The trial under way when Ctrl-C came is not recorded as a failure.
        self.assertEqual(trial_count(self.db), done["new_trials"])
        with sqlite3.connect(self.db) as c:
            self.assertEqual({r[0] for r in c.execute("SELECT status FROM trials")}, {"ok"})

    def test_a_run_without_a_correct_trial_fails(self):
        # Once: exit 0 although the halide backend compiles no fp8 cache.
        r = self.tune("d_k=8 kv_cache=contiguous kv_dtype=fp8_e4m3", "--trials", "2", "--backend",
                      "halide", *FAST, code=1)
        self.assertIn("none of the 1 trials of", r.stderr)

    def test_a_hanging_candidate_costs_a_record(self):
        # No trial ran correctly, so the tune failed: exit 1.
        r = self.tune(SPEC, "--trials", "2", "--backend", "mlir,halide", "--seq-q", "4096",
                      "--runs", "50", "--run-timeout", "1", code=1)
        trials = [e for e in events(r.stdout) if e["event"] == "trial"]
        self.assertEqual([t["status"] for t in trials], ["timeout", "timeout"])
        self.assertIn("timed out after", trials[0]["detail"])
        self.assertEqual(trial_count(self.db), 2)

    def test_shards_write_one_database_at_once_and_merge(self):
        # Two shards of one search, concurrently on the same database file.
        procs = [subprocess.Popen([ATTNC, "tune", SPEC, "--trials", "4", *FAST, "--shard",
                                   "%d/2" % i, "--db", self.db], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for i in range(2)]
        outs = [p.communicate(timeout=300) for p in procs]
        self.assertEqual([p.returncode for p in procs], [0, 0], outs)
        shard_trials = [[e for e in events(o) if e["event"] == "trial"] for o, _ in outs]
        # Each candidate is measured once: the defaults both shards start from by one of them.
        self.assertEqual(trial_count(self.db),
                         sum(not t["reused"] for trials in shard_trials for t in trials))
        # The shards' searched candidates (past the defaults) are disjoint.
        searched = [{t["candidate"] for t in trials[2:]} for trials in shard_trials]
        self.assertFalse(searched[0] & searched[1])

        # Merging folds every trial in once.
        merged = os.path.join(self.tmp, "merged.db")
        r = self.expect(attnc("tune", "--merge", self.db, self.db, "--db", merged), 0)
        self.assertIn("merged %d new trials" % trial_count(self.db), r.stdout)
        self.assertIn("merged 0 new trials", r.stdout)
        self.assertEqual(trial_count(merged), trial_count(self.db))

    def test_concurrent_tunes_claim_candidates(self):
        # Once: two tunes of one search on one database both measured every candidate.
        procs = [subprocess.Popen([ATTNC, "tune", SPEC, "--trials", "3", *FAST, "--backend",
                                   "halide", "--db", self.db], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
        outs = [p.communicate(timeout=300) for p in procs]
        self.assertEqual([p.returncode for p in procs], [0, 0], outs)
        self.assertEqual(trial_count(self.db), 3)
        trials = [e for o, _ in outs for e in events(o) if e["event"] == "trial"]
        self.assertEqual(sorted(t["reused"] for t in trials), [False] * 3 + [True] * 3)

    def test_export_and_import(self):
        self.tune(SPEC, "--trials", "2", *FAST)
        jsonl = os.path.join(self.tmp, "trials.jsonl")
        self.expect(attnc("tune", "--export", jsonl, "--db", self.db), 0, "exported 2 trials")
        other = os.path.join(self.tmp, "other.db")
        self.expect(attnc("tune", "--import", jsonl, "--db", other), 0, "imported 2 new trials")
        self.expect(attnc("tune", "--import", jsonl, "--db", other), 0, "imported 0 new trials")
        bad = os.path.join(self.tmp, "bad.jsonl")
        with open(bad, "w") as f:
            f.write(read(jsonl).splitlines()[0] + "\n{not json\n")
        self.expect(attnc("tune", "--import", bad, "--db", other), 2, "line 2 is not a trial")

    def test_damaged_and_foreign_databases_are_reported_and_kept(self):
        garbage = os.path.join(self.tmp, "garbage.db")
        with open(garbage, "wb") as f:
            f.write(b"this is not a database" * 100)
        before = read(garbage, "rb")
        self.expect(attnc("tune", SPEC, "--trials", "1", "--db", garbage), 1,
                    "garbage.db", "not a database", "left untouched")
        self.assertEqual(read(garbage, "rb"), before)
        # compile warns and goes on with the default schedule.
        out = os.path.join(self.tmp, "b")
        self.expect(attnc("compile", SPEC, "--backend", "mlir", "-o", out,
                          env={"ATTNC_TUNING_DB": garbage}), 0,
                    "warning", "compiling without its records")

        foreign = os.path.join(self.tmp, "foreign.db")
        with sqlite3.connect(foreign) as c:
            c.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            c.execute("INSERT INTO meta VALUES('schema_version', '99')")
            c.execute("CREATE TABLE trials(uid TEXT)")
            c.execute("INSERT INTO trials VALUES('keep me')")
        self.expect(attnc("tune", SPEC, "--trials", "1", "--db", foreign), 1,
                    "schema version 99", "reads version 1")
        with sqlite3.connect(foreign) as c:
            self.assertEqual(c.execute("SELECT uid FROM trials").fetchall(), [("keep me",)])

    def test_bad_options(self):
        self.expect(attnc("tune", SPEC, "--shard", "2/2", "--db", self.db), 2, "0 <= I < N")
        self.expect(attnc("tune", "--db", self.db), 2, "a spec to tune is required")
        self.expect(attnc("tune", SPEC, "--export", "x.jsonl", "--db", self.db), 2,
                    "or one of --merge, --export, --import")
        self.expect(attnc("tune", SPEC, "--strategy", "annealing", "--db", self.db), 2,
                    "known: evolution, random")
        self.expect(attnc("tune", SPEC, "--target", "cuda-sm_90", "--db", self.db), 1,
                    "measures on an NVIDIA GPU")
        self.assertFalse(os.path.exists(self.db) and trial_count(self.db))
