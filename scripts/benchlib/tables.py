"""A peer table: per case, attnc's bundles then each peer, every figure as median (min-max) over
its processes, its rate against this machine's limit, and its time against attnc's."""
import statistics

from rounds import cell


def markdown(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(map(str, row)) + " |" for row in rows])


def figure_cells(rounds, key, attnc_key, work, limit):
    """[ms, rate (% of limit), attnc's speed vs this] for `key`, `work` in FLOPs (the rate in
    GFLOP/s) or bytes (GB/s). A key that could not run says why."""
    samples = rounds.figure(key)
    if samples is None:
        reason = " ".join(rounds.error(key).split()).replace("|", "/")
        return ["could not run: " + reason[:160], "–", "–"]
    median = statistics.median(samples)
    speed = giga_per_second(work, median)
    versus = "–"
    ours = rounds.figure(attnc_key)
    if key != attnc_key and ours is not None:
        versus = "%.2fx" % (median / statistics.median(ours))
    return [cell(samples), "%.1f (%.0f%%)" % (speed, 100 * speed / limit), versus]


def giga_per_second(work, ms):
    """GFLOP/s for work in FLOPs, GB/s for work in bytes."""
    return work / ms / 1e6


class PeerTable:
    def __init__(self, rounds, peers):
        self.rounds = rounds
        self.peers = peers
        self.rows = []  # (case, threads, [(key, implementation, what ran or None)])

    def add(self, case, threads, ours):
        """`ours`: attnc's entries as (label, what ran, argv of its `attnc bench` process)."""
        implementations = []
        for label, ran, argv in ours:
            key = "%s|%d|%s" % (case["id"], threads, label)
            self.rounds.attnc(key, argv)
            implementations.append((key, label, ran))
        for peer in self.peers:
            key = "%s|%d|%s" % (case["id"], threads, peer)
            self.rounds.peer(peer, threads, key, case)
            implementations.append((key, peer, None))
        self.rows.append((case, threads, implementations))

    def markdown(self, leading, work, limit, rate_name):
        """`leading`: (header, case, threads -> cells) of the columns that name the case;
        `work(case, implementation)` in FLOPs or bytes; `limit(case, threads, what ran)` in
        the rate's unit."""
        header = leading[0] + ["implementation", "what ran", "ms: median (min–max)",
                               "%s (%% of limit)" % rate_name, "time vs attnc"]
        out = []
        for case, threads, implementations in self.rows:
            ours = implementations[0][0]
            for key, label, ran in implementations:
                version = self.rounds.versions.get(label)
                name = "%s (%s)" % (label, version) if version else label
                what_ran = ran or self.rounds.kernels.get(key, "–")
                out.append(leading[1](case, threads) + [name, what_ran] + figure_cells(
                    self.rounds, key, ours, work(case, label), limit(case, threads, ran)))
        return markdown(header, out)
