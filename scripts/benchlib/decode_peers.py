"""scripts/bench-decode: attnc's decode kernel against every CPU peer from PyPI, in one run.

  1. One new query row per head against a KV cache of Tk tokens (B 1, d 128, 8 KV heads, GQA
     ratios 1, 4 and 8, f16 and bf16, 1 and 2 threads), the caches flushed before each call on
     both sides, as GB/s of K and V read and % of the read bandwidth measured in the same run:
     attnc's default bundle (its decode kernel), ONNX Runtime's GroupQueryAttention with past
     K/V, PyTorch's SDPA (enable_gqa), FlexAttention, OpenVINO's SDPA and its paged attention
     (blocks of 32 in shuffled order), IREE's attention op.
  2. attnc's KV caches at Tk 16k (H 32 / 8, f16): contiguous, paged in both layouts and page
     sizes, int8 and fp8 E4M3 rows (d bytes and an f32 scale a row), each against the plain spec.
  3. Steps of several query rows (speculative decoding: Tq 1 to 16, causal among them, H 8 and
     32 / 8, f16, Tk 16k) against the peers taking as many new tokens, judged by the time their
     FLOPs (4 H Tq Tk d) take at the FMA peak.
Each figure is the median over separate processes (rounds.py)."""
import functools
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peers"))
import attnc  # noqa: E402
import machine  # noqa: E402
import tables  # noqa: E402
from rounds import Rounds, arguments  # noqa: E402

KV_HEADS, D, CACHED = 8, 128, 16384
DECODE_PEERS = ["onnxruntime", "torch-sdpa", "flex", "openvino", "openvino-paged", "iree"]
ROWS_PEERS = ["onnxruntime", "torch-sdpa", "flex", "openvino", "iree"]
CACHES = ["kv_cache=contiguous", "kv_cache=paged page_size=16",
          "kv_cache=paged page_size=16 page_layout=hnd",
          "kv_cache=paged page_size=64 page_layout=hnd",
          "kv_cache=paged page_size=256 page_layout=hnd", "kv_cache=contiguous kv_dtype=int8",
          "kv_cache=paged page_size=16 page_layout=hnd kv_dtype=int8",
          "kv_cache=contiguous kv_dtype=fp8_e4m3",
          "kv_cache=paged page_size=16 page_layout=hnd kv_dtype=fp8_e4m3"]


def make_case(table, heads, dtype, tq, tk, mask, runs):
    return {"id": "%s H%d %s Tq%d Tk%d" % (table, heads, dtype, tq, tk), "heads": heads,
            "kv_heads": KV_HEADS, "d": D, "tq": tq, "tk": tk, "dtype": dtype, "mask": mask,
            "runs": runs, "flush": True}


def decode_table(rounds, args, work):
    table = tables.PeerTable(rounds, DECODE_PEERS)
    for heads in (8, 32, 64):
        for dtype in ("f16", "bf16"):
            bundle = attnc.compile_bundle("heads=%d kv_heads=%d d_k=%d dtype=%s" % (
                heads, KV_HEADS, D, dtype), work)
            for tk in [CACHED] if args.quick else [1024, 4096, CACHED, 65536]:
                case = make_case("decode", heads, dtype, 1, tk, "none", 20)
                for threads in (1, 2):
                    table.add(case, threads, [("attnc", "decode kernel", attnc.bench_argv(
                        bundle, 1, tk, threads, 20, flush=True))])
    return table


def cache_table(rounds, work):
    """One row per thread count: the plain spec, then each cache (attnc alone)."""
    table = tables.PeerTable(rounds, [])
    spec = "heads=32 kv_heads=%d d_k=%d dtype=f16" % (KV_HEADS, D)
    case = make_case("caches", 32, "f16", 1, CACHED, "none", 20)
    for threads in (1, 2):
        entries = [("attnc, no cache", "decode kernel", attnc.bench_argv(
            attnc.compile_bundle(spec, work), 1, CACHED, threads, 20, flush=True))]
        for cache in CACHES:
            bundle = attnc.compile_bundle(spec + " " + cache, work)
            entries.append(("attnc " + cache, "decode kernel", attnc.bench_argv(
                bundle, 1, CACHED, threads, 20, flush=True, extra=["--lengths", str(CACHED)])))
        table.add(case, threads, entries)
    return table


def rows_table(rounds, args, work):
    table = tables.PeerTable(rounds, ROWS_PEERS)
    for heads in (8, 32):
        bundle = attnc.compile_bundle("heads=%d kv_heads=%d d_k=%d dtype=f16 mask=causal" % (
            heads, KV_HEADS, D), work)
        for tq in (1, 4, 16) if args.quick else (1, 2, 4, 8, 16):
            case = make_case("rows", heads, "f16", tq, CACHED, "causal", 10)
            for threads in (1, 2):
                table.add(case, threads, [("attnc", "decode kernel", attnc.bench_argv(
                    bundle, tq, CACHED, threads, 10, flush=True))])
    return table


def kv_bytes(case, implementation):
    """K and V read by one step: d bytes and an f32 scale a row for int8 and fp8 caches."""
    row = D + 4 if "kv_dtype" in implementation else 2 * D
    return 2 * KV_HEADS * case["tk"] * row


def step_flops(case, implementation):
    return 4 * case["heads"] * case["tq"] * case["tk"] * D


def bandwidth(limits, case, threads, ran):
    return limits["bandwidth_1"] if threads == 1 else limits["bandwidth_all"]


def fma_peak(limits, case, threads, ran):
    return limits["fma"] * threads


LEADING = (["H / H_kv", "dtype", "Tq", "Tk", "threads"], lambda case, threads: [
    "%d / %d" % (case["heads"], case["kv_heads"]), case["dtype"], case["tq"], case["tk"],
    threads])


def main():
    args = arguments(__doc__, "Tk 16k only; Tq 1, 4 and 16")
    limits = machine.measure()
    rounds = Rounds(args.rounds, sys.executable)
    with tempfile.TemporaryDirectory() as work:
        decode, caches = decode_table(rounds, args, work), cache_table(rounds, work)
        rows = rows_table(rounds, args, work)
        rounds.run()
    print(machine.header(limits))
    print("\npeers: %s; attnc %s; %d processes a figure, alternated; caches flushed before "
          "each call" % (", ".join(sorted(set(rounds.versions.values()))), attnc.commit(),
                         args.rounds))
    print("\n" + decode.markdown(LEADING, kv_bytes, functools.partial(bandwidth, limits),
                                 "K/V GB/s"))
    print("\nKV caches, attnc alone (time vs attnc: against the spec without a cache):\n")
    print(caches.markdown(LEADING, kv_bytes, functools.partial(bandwidth, limits), "K/V GB/s"))
    print("\nSeveral query rows a step, causal among them (the limit: the FLOPs at the FMA "
          "peak of the threads used):\n")
    print(rows.markdown(LEADING, step_flops, functools.partial(fma_peak, limits), "GFLOP/s"))


if __name__ == "__main__":
    main()
