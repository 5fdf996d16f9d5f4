#!/usr/bin/env python3
"""Times one peer's CPU attention on a list of cases, in this one process, at one thread count.

Run with the peers' venv (scripts/python-env --peers prints its Python); the bench scripts start
one such process per peer, thread count and round, alternating with attnc's own processes
(scripts/peers/rounds.py), so each figure is the median over separate processes.

  PYTHON attention.py PEER --threads N --cases CASES.json

CASES.json is a list of objects:
  id        a name the caller chose, echoed back
  heads, kv_heads, d, tq, tk       the shape (batch 1; the last tq of the tk positions are the
            queries', as in decoding: attnc's bottom-right alignment)
  dtype     f32, bf16 or f16
  mask      none, causal, window (causal and the last `window` keys), document (`documents`
            equal documents, each token sees its own), alibi (causal, with ALiBi's slopes) or
            softcap (causal, scores soft-capped at `softcap`: FlexAttention's peers only)
  runs      timed calls; flush: whether each call starts with the caches flushed
Prints one JSON object per case and line: {"id", "median_ms", "kernel", "version"}, or
{"id", "error"} where the peer cannot run the case (the message says why)."""
import argparse
import json
import sys

import peer_registry
import timing


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("peer", choices=sorted(peer_registry.PEERS))
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--cases", required=True)
    args = parser.parse_args()
    peer = peer_registry.PEERS[args.peer](args.threads)
    with open(args.cases) as f:
        cases = json.load(f)
    for case in cases:
        print(json.dumps(run_case(peer, case)), flush=True)


def run_case(peer, case):
    try:
        call, kernel = peer.prepare(case)
        median = timing.median_ms(call, case["runs"], case.get("flush", False))
    except peer_registry.Unsupported as refusal:
        return {"id": case["id"], "error": str(refusal)}
    except Exception as failure:  # a peer's own error is a table entry, not a lost run
        return {"id": case["id"], "error": "%s: %s" % (type(failure).__name__, failure)}
    return {"id": case["id"], "median_ms": median, "kernel": kernel, "version": peer.version}


if __name__ == "__main__":
    sys.exit(main())
