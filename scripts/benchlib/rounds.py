"""Figures that survive a noisy machine. On these VMs one process can run a kernel at half the
speed of the next, so every figure is the median over at least five separate processes, attnc's
and each peer's alternated round by round (odd rounds in reverse order, so a drift of the
machine weighs on both alike), given with its spread: min-max over the processes, marked where
(max - min) / median passes 20%, never averaged away.

attnc's side is one `attnc bench` process per figure and round; a peer's is one process per
peer, thread count and round timing all of its cases (scripts/peers/attention.py), since its
start (importing torch, loading a compiled model) costs seconds."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import attnc
import machine

MIN_ROUNDS = 5
SPREAD_LIMIT = 0.20
PEERS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peers")


def arguments(doc, quick, seq=False, masks=None):
    """A bench script's options: --rounds (processes a figure), --quick (QUICK says what it
    keeps), with SEQ --seq (T, queries and keys), and with MASKS (the masks its cases take)
    --masks, the ones to run (every one by default)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=MIN_ROUNDS)
    parser.add_argument("--quick", action="store_true", help=quick)
    if seq:
        parser.add_argument("--seq", type=int, default=2048, help="T, queries and keys")
    if masks:
        parser.add_argument("--masks", nargs="+", choices=masks, default=masks,
                            help="only these masks' cases")
    return parser.parse_args()


def spread(samples):
    return (max(samples) - min(samples)) / statistics.median(samples)


def milliseconds(value):
    """Three significant digits, never an exponent: 0.352, 27.9, 2770."""
    return "%.0f" % value if value >= 100 else "%.3g" % value


def cell(samples):
    """'12.3 (12.0-13.5)', marked '**spread 35%**' past the limit."""
    text = "%s (%s–%s)" % tuple(map(milliseconds, (statistics.median(samples), min(samples),
                                                   max(samples))))
    if spread(samples) > SPREAD_LIMIT:
        text += " **spread %.0f%%**" % (100 * spread(samples))
    return text


class Rounds:
    def __init__(self, rounds, peer_python):
        if rounds < MIN_ROUNDS:
            raise ValueError("a figure needs at least %d processes, not %d" % (MIN_ROUNDS, rounds))
        self.rounds = rounds
        self.peer_python = peer_python
        self.attnc_jobs = {}    # key -> argv of an `attnc bench ... --json` process
        self.peer_cases = {}    # (peer, threads) -> [case]
        self.samples = {}       # key -> [ms, one per process]
        self.kernels = {}       # key -> what ran (a peer's operator or kernel)
        self.errors = {}        # key -> why a peer could not run it
        self.versions = {}      # peer -> its version

    def attnc(self, key, argv):
        self.attnc_jobs[key] = argv

    def peer(self, peer, threads, key, case):
        self.peer_cases.setdefault((peer, threads), []).append(dict(case, id=key))

    def run(self):
        steps = [("attnc", key) for key in self.attnc_jobs] + [
            ("peer", group) for group in self.peer_cases]
        for round_index in range(self.rounds):
            print("round %d of %d" % (round_index + 1, self.rounds), file=sys.stderr)
            for kind, what in (steps if round_index % 2 == 0 else reversed(steps)):
                if kind == "attnc":
                    self.samples.setdefault(what, []).append(attnc_ms(self.attnc_jobs[what]))
                else:
                    self.run_peer(*what)

    def run_peer(self, peer, threads):
        cases = self.peer_cases[(peer, threads)]
        for line in peer_process(self.peer_python, peer, threads, cases):
            if "error" in line:
                self.errors[line["id"]] = line["error"]
                continue
            self.samples.setdefault(line["id"], []).append(line["median_ms"])
            self.kernels[line["id"]] = line["kernel"]
            self.versions[peer] = line["version"]

    def figure(self, key):
        """The samples of a key that ran in every round, else None (see error(key))."""
        samples = self.samples.get(key, [])
        return samples if len(samples) == self.rounds else None

    def error(self, key):
        if key in self.errors:
            return self.errors[key]
        return "ran in %d of %d rounds" % (len(self.samples.get(key, [])), self.rounds)


def attnc_ms(argv):
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(argv), result.returncode,
                                                   result.stderr.strip()))
    return json.loads(result.stdout)["timings"]["kernel"]["median_ms"]


def peer_process(python, peer, threads, cases):
    """The peer's results, one dict per case; a process that dies gives every case it did not
    report an error naming its exit status and last words."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as listing:
        json.dump(cases, listing)
        listing.flush()
        result = subprocess.run([python, os.path.join(PEERS_DIR, "attention.py"), peer,
                                 "--threads", str(threads), "--cases", listing.name],
                                capture_output=True, text=True)
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    reported = {line["id"] for line in lines}
    last_words = (result.stderr.strip().splitlines() or [""])[-1][:200]
    for case in cases:
        if case["id"] not in reported:
            lines.append({"id": case["id"], "error": "%s exited with %d before it: %s" % (
                peer, result.returncode, last_words)})
    return lines


def measure(args, schedule, gemm=False):
    """A bench script's run: the machine's limits, then every process that schedule(rounds,
    work) lists, with work a scratch directory for its bundles. Returns (limits, rounds)."""
    limits = machine.measure(gemm)
    rounds = Rounds(args.rounds, sys.executable)
    with tempfile.TemporaryDirectory() as work:
        schedule(rounds, work)
        rounds.run()
    return limits, rounds


def preamble(limits, rounds, what):
    """What a table stands on: the machine and its limits, the peers' versions, attnc's commit,
    the processes a figure, and WHAT the cases share."""
    return "%s\n\npeer: %s; attnc %s; %d processes a figure, alternated; %s" % (
        machine.header(limits), ", ".join(sorted(set(rounds.versions.values()))) or "none",
        attnc.commit(), rounds.rounds, what)
