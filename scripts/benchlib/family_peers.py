"""scripts/bench-family: the attention family on the MLIR backend against Halide's fused kernels
and, for multi-head attention, PyTorch's nn.MultiheadAttention, at 1 and 2 threads, in one run.

Every variant of docs/spec.md at B 1, Tq = Tk = T (2048), f32: mha (H 8, d_model 512, no mask
and causal), additive and bilinear (H 4, d 64), linear (elu+1, FAVOR+ with 256 features, causal
elu+1) and Linformer (proj_len 256). Each figure is the median over separate processes, MLIR's,
Halide's and the peer's alternated round by round (rounds.py), the limits measured in the same
run (machine.py)."""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peers"))
import attnc  # noqa: E402
import tables  # noqa: E402
from rounds import arguments, cell, measure, preamble  # noqa: E402

SPECS = [
    "variant=mha heads=8 d_model=512",
    "variant=mha heads=8 d_model=512 mask=causal",
    "variant=additive heads=4 d_k=64 d_attn=64",
    "variant=bilinear heads=4 d_k=64",
    "variant=linear heads=4 d_k=64 feature_map=elu1",
    "variant=linear heads=4 d_k=64 feature_map=favor features=256 seed=1",
    "variant=linear heads=4 d_k=64 feature_map=elu1 mask=causal",
    "variant=linformer heads=4 d_k=64 proj_len=256",
]
QUICK = SPECS[:1] + SPECS[4:5]
BACKENDS = ("mlir", "halide")
RUNS = 20  # timed calls a process: kernels of a few ms vary from call to call


def key(spec, implementation, threads):
    """A figure's name (a peer's case id goes through JSON, so a string)."""
    return "%s | %s | %d" % (spec, implementation, threads)


def peer_case(spec, seq):
    """nn.MultiheadAttention's case for an mha spec, else None."""
    if "variant=mha" not in spec:
        return None
    return {"heads": 8, "d_model": 512, "tq": seq, "tk": seq, "dtype": "f32",
            "mask": "causal" if "mask=causal" in spec else "none", "runs": RUNS}


def schedule(rounds, specs, seq, work):
    """Every process of the run: a bundle per spec and backend at each thread count, and the
    peer's case for mha."""
    for spec in specs:
        for backend in BACKENDS:
            bundle = attnc.compile_bundle(spec, os.path.join(work, backend), backend=backend)
            for threads in (1, 2):
                rounds.attnc(key(spec, backend, threads),
                             attnc.bench_argv(bundle, seq, seq, threads, RUNS))
        case = peer_case(spec, seq)
        if case:
            for threads in (1, 2):
                rounds.peer("torch-mha", threads, key(spec, "torch", threads), case)


def ratio(rounds, slower, faster):
    a, b = rounds.figure(slower), rounds.figure(faster)
    return "%.2fx" % (statistics.median(a) / statistics.median(b)) if a and b else "–"


def figure(rounds, key):
    samples = rounds.figure(key)
    return cell(samples) if samples else "could not run: " + rounds.error(key)[:120]


def rows(rounds, specs):
    for spec in specs:
        for threads in (2, 1):
            mlir, halide, torch = (key(spec, name, threads) for name in ("mlir", "halide", "torch"))
            peer = peer_case(spec, 0) is not None
            yield [spec, threads, figure(rounds, mlir), figure(rounds, halide),
                   ratio(rounds, halide, mlir), figure(rounds, torch) if peer else "–",
                   ratio(rounds, torch, mlir) if peer else "–"]


def main():
    args = arguments(__doc__, "mha and linear elu+1 only", seq=True)
    specs = QUICK if args.quick else SPECS
    limits, rounds = measure(args, lambda rounds, work: schedule(rounds, specs, args.seq, work))
    print(preamble(limits, rounds, "B 1, T %d, f32" % args.seq))
    print("\n" + tables.markdown(
        ["spec", "threads", "MLIR ms", "Halide ms", "MLIR faster by", "nn.MultiheadAttention ms",
         "MLIR faster by"], rows(rounds, specs)))


if __name__ == "__main__":
    main()
