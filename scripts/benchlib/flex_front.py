"""scripts/bench-flex: attnc's FlexAttention front against torch's compiled FlexAttention on the
CPU, in one run.

  1. attnc.torch.flex_attention and torch.compile(flex_attention) on the same callables
     (scripts/peers/torch_peers.py: flex_call), H 8, T 2048: causal, a sliding window of 256,
     8 documents, ALiBi and tanh softcap (causal); d 64 and 128, f32 and bf16, 1 and 2 threads
     (--quick: d 64, f32). Each figure the median over separate processes, alternated
     (rounds.py); rates count the kept scores' 4 H d FLOPs against the peak of the threads
     (f32: FMA; bf16: AMX, else vdpbf16ps).
  2. The first call in a new process, the kernel cache warm (attnc) or Inductor's cache warm
     (FlexAttention, whose first call compiles), causal, d 64, f32.
  3. attnc::attention's cost over the kernel's: the same bundle timed from Python (the torch
     operator) and from C (`attnc bench`), Tq 1 and Tk 16, 1 thread, alternated processes."""
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peers"))
import attnc as attnc_tools  # noqa: E402
import cases  # noqa: E402
import machine  # noqa: E402
import tables  # noqa: E402
from rounds import Rounds, arguments, attnc_ms, cell  # noqa: E402

HEADS, WINDOW, DOCUMENTS, SOFTCAP = 8, 256, 8, 30.0
FUNCTIONS = ["causal", "window", "document", "alibi", "softcap"]
PEERS = ["attnc-flex", "flex"]


def make_case(function, d, dtype, seq):
    return {"heads": HEADS, "kv_heads": HEADS, "d": d, "tq": seq, "tk": seq, "dtype": dtype,
            "mask": function, "runs": 5, "window": WINDOW, "documents": DOCUMENTS,
            "softcap": SOFTCAP}


def key(peer, function, d, dtype, threads):
    return "%s %s d%d %s %dt" % (peer, function, d, dtype, threads)


def speed_table(rounds, limits, shapes, seq):
    rows = []
    for function, d, dtype, threads in shapes:
        case = make_case(function, d, dtype, seq)
        flops = 4 * HEADS * d * int(cases.keep_matrix(case).sum())
        keys = [key(peer, function, d, dtype, threads) for peer in PEERS]
        samples = [rounds.figure(k) for k in keys]
        if None in samples:
            rows.append([function, d, dtype, threads] + [
                cell(s) if s else rounds.error(k) for k, s in zip(keys, samples)] + ["-", "-"])
            continue
        ours, theirs = map(statistics.median, samples)
        rate = tables.giga_per_second(flops, ours)
        rows.append([function, d, dtype, threads, cell(samples[0]), cell(samples[1]),
                     "%.1f (%.0f%%)" % (rate, 100 * rate / (peak(limits, dtype) * threads)),
                     "%.2fx" % (theirs / ours)])
    return tables.markdown(["function", "d", "dtype", "threads", "attnc.torch.flex_attention ms",
                            "torch.compile(flex_attention) ms", "attnc GFLOP/s (% of peak)",
                            "attnc's speed / FlexAttention's"], rows)


def peak(limits, dtype):
    """A core's peak for the dtype's products: f32 FMAs, or the best bf16 unit here."""
    return limits["fma"] if dtype == "f32" else limits["amx"] or limits["dot"] or limits["fma"]


FIRST_CALL = """
import sys, time, torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention
import attnc.torch
torch.set_num_threads(1)
q = k = v = torch.rand(1, 8, 2048, 64)
causal = lambda b, h, q_idx, kv_idx: q_idx >= kv_idx
if sys.argv[1] == "attnc":
    call = lambda: attnc.torch.flex_attention(q, k, v, mask_mod=causal)
else:
    mask = create_block_mask(causal, 1, None, 2048, 2048, device="cpu")
    compiled = torch.compile(flex_attention)
    call = lambda: compiled(q, k, v, block_mask=mask)
start = time.perf_counter()
with torch.no_grad():
    call()
first = time.perf_counter() - start
start = time.perf_counter()
with torch.no_grad():
    call()
print(1e3 * first, 1e3 * (time.perf_counter() - start))
"""

PER_CALL = """
import statistics, sys, time, torch
import attnc.torch
torch.set_num_threads(1)
q = torch.rand(1, 8, 1, 64)
k = v = torch.rand(1, 8, 16, 64)
spec = sys.argv[1]
for _ in range(200):
    attnc.torch.attention(q, k, v, spec=spec)
times = []
for _ in range(2000):
    start = time.perf_counter()
    attnc.torch.attention(q, k, v, spec=spec)
    times.append(time.perf_counter() - start)
print(1e3 * statistics.median(times))
"""


def python_ms(source, *arguments):
    result = subprocess.run([sys.executable, "-c", source, *arguments], capture_output=True,
                            text=True)
    if result.returncode != 0:
        raise RuntimeError(result.stderr.strip().splitlines()[-1])
    return [float(x) for x in result.stdout.split()]


def first_calls(rounds):
    python_ms(FIRST_CALL, "attnc")  # the kernel and Inductor's caches warm
    python_ms(FIRST_CALL, "flex")
    samples = {"attnc": [], "flex": []}
    for _ in range(rounds):
        for side in samples:
            samples[side].append(python_ms(FIRST_CALL, side))
    rows = [[name, cell([s[0] for s in samples[side]]), cell([s[1] for s in samples[side]])]
            for side, name in (("attnc", "attnc.torch.flex_attention"),
                               ("flex", "torch.compile(flex_attention)"))]
    return tables.markdown(["implementation", "first call ms", "second call ms"], rows)


def per_call(rounds, work):
    spec = "heads=8 d_k=64"
    bundle = attnc_tools.compile_bundle(spec, work)
    c_argv = attnc_tools.bench_argv(bundle, 1, 16, 1, 2000)
    python_ms(PER_CALL, spec)
    python, c = [], []
    for _ in range(rounds):
        python.append(python_ms(PER_CALL, spec)[0])
        c.append(attnc_ms(c_argv))
    overhead = [1e3 * (p - c_ms) for p, c_ms in zip(python, c)]
    return tables.markdown(["attnc::attention from Python ms", "the bundle from C ms",
                            "overhead µs"], [[cell(python), cell(c), cell(overhead)]])


def main():
    args = arguments(__doc__, "d 64, f32 only", seq=True)
    limits = machine.measure()
    rounds = Rounds(args.rounds, sys.executable)
    shapes = [(function, d, dtype, threads)
              for d in ([64] if args.quick else [64, 128])
              for dtype in (["f32"] if args.quick else ["f32", "bf16"])
              for threads in (1, 2) for function in FUNCTIONS]
    for function, d, dtype, threads in shapes:
        for peer in PEERS:
            rounds.peer(peer, threads, key(peer, function, d, dtype, threads),
                        make_case(function, d, dtype, args.seq))
    rounds.run()
    with tempfile.TemporaryDirectory() as work:
        overhead = per_call(args.rounds, work)
    print(machine.header(limits))
    print("\npeers: %s; attnc %s; %d processes a figure, alternated; H %d, T %d" % (
        ", ".join(sorted(set(rounds.versions.values()))), attnc_tools.commit(), args.rounds,
        HEADS, args.seq))
    print("\n" + speed_table(rounds, limits, shapes, args.seq))
    print("\nFirst call in a new process (warm caches), causal, d 64, f32, 1 thread:\n")
    print(first_calls(args.rounds))
    print("\nPer call, Tq 1, Tk 16, H 8, d 64, 1 thread, median of 2000 calls a process:\n")
    print(overhead)


if __name__ == "__main__":
    main()
