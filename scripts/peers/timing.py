"""The peers' timing: two warm-up calls (one for a slow peer), then the median of `runs` timed
calls, each optionally after a flush of the caches (as `attnc bench --flush-caches` does for
attnc's side), so a decode step reads its K/V cache from memory as between a model's steps."""
import statistics
import time

import numpy

# Larger than any last-level cache here (32 MiB an EPYC CCD, 105 MiB a Sapphire Rapids socket).
FLUSH_BYTES = 256 << 20
_flush_buffer = None


def flush_caches():
    global _flush_buffer
    if _flush_buffer is None:
        _flush_buffer = numpy.ones(FLUSH_BYTES // 8)
    _flush_buffer += 1.0  # read and write every line: the caches now hold this buffer


# A peer slower than this a call (IREE's default CPU attention) is timed over SLOW_RUNS calls
# after one warm-up: its median still comes from every process of the round.
SLOW_CALL_SECONDS, SLOW_RUNS = 1.0, 3


def median_ms(call, runs, flush):
    start = time.perf_counter()
    call()
    if time.perf_counter() - start < SLOW_CALL_SECONDS:
        call()
    else:
        runs = min(runs, SLOW_RUNS)
    times = []
    for _ in range(runs):
        if flush:
            flush_caches()
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)
