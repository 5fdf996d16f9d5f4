"""scripts/bench-peers: attnc's prefill against every CPU peer from PyPI, one thread, in one run.

  1. H 8, T 2048, d 64 and 128, no mask and causal, f32 then bf16: attnc's default bundle (its
     products named from its assembly; on a CPU with AMX also the x86-64-zen4 bundle of dot
     products) beside ONNX Runtime (MultiHeadAttention; Attention-23 is_causal), PyTorch's
     flash SDPA, FlexAttention, OpenVINO's SDPA and IREE's attention op.
  2. The programmable masks, H 8, T 2048, d 64, f32 and bf16: causal, a sliding window of 256,
     8 documents and ALiBi (causal), written as attnc expressions (mask_mod, score_mod) and as
     FlexAttention's mask_mod / score_mod; the other peers take them as mask tensors. And a
     bias, a float [1, H, T, T] the scores add (a learned bias, a float attention mask):
     attnc's bias=true, FlexAttention's score_mod reading it, the others' float mask.
Rates count the useful work, 4 H d over the kept scores. Each figure is the median over
separate processes (rounds.py), the limits are measured in the same run (machine.py)."""
import functools
import os
import sys
import tempfile

import numpy

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peers"))
import attnc  # noqa: E402
import cases  # noqa: E402
import machine  # noqa: E402
import tables  # noqa: E402
from rounds import Rounds, arguments  # noqa: E402

PEERS = ["onnxruntime", "torch-sdpa", "flex", "openvino", "iree"]
HEADS, WINDOW, DOCUMENTS = 8, 256, 8
BUILT_IN, WRITTEN = ["none", "causal"], ["causal", "window", "document", "alibi", "bias"]
RUNS = 5


def written_spec(mask):
    """attnc's spec of a programmable mask: the same functions as the peers' (cases.keep)."""
    causal = 'mask_mod="kv_idx <= qpos"'
    return {
        "causal": causal,
        "window": 'mask_mod="kv_idx <= qpos && qpos - kv_idx < %d"' % WINDOW,
        "document": 'aux="q_doc:i32[B,Tq] kv_doc:i32[B,Tk]" '
                    'mask_mod="q_doc[b, q_idx] == kv_doc[b, kv_idx]"',
        "alibi": 'aux="slopes:f32[heads]" %s score_mod="score - slopes[h] * abs(qpos - kv_idx)"'
                 % causal,
        "bias": "bias=true",
    }[mask]


def written_params(mask, case, work):
    seq = case["tq"]
    if mask == "bias":
        return ["--bias", attnc.npy(work, "bias", cases.score_bias(case))]
    if mask == "document":
        ids = cases.document_ids(seq, DOCUMENTS)[None]
        return ["--param", attnc.save(work, "q_doc", ids), "--param",
                attnc.save(work, "kv_doc", ids)]
    if mask == "alibi":
        slopes = numpy.array(cases.alibi_slopes(HEADS), numpy.float32)
        return ["--param", attnc.save(work, "slopes", slopes)]
    return []


def kept_scores(case):
    kept = cases.keep_matrix(case)
    return case["tq"] * case["tk"] if kept is None else int(kept.sum())


def make_case(table, d, mask, dtype, seq):
    case = {"heads": HEADS, "kv_heads": HEADS, "d": d, "tq": seq, "tk": seq, "dtype": dtype,
            "mask": mask, "runs": RUNS, "window": WINDOW, "documents": DOCUMENTS}
    case["id"] = "%s %s d%d %s" % (table, dtype, d, mask)
    return case


def attnc_entries(spec, targets, case, work, extra=()):
    """attnc's rows of a case: one bundle of `spec` per (label, target)."""
    return [(label, attnc.products(spec, work, target), attnc.bench_argv(
        attnc.compile_bundle(spec, work, target), case["tq"], case["tk"], 1, 7, extra=extra))
        for label, target in targets]


def builtin_table(rounds, limits, args, work):
    """Table 1: the built-in masks, f32 and bf16 (on AMX machines also the zen4 bundle)."""
    table = tables.PeerTable(rounds, PEERS)
    for dtype in ("f32", "bf16"):
        for d in [64] if args.quick else [64, 128]:
            for mask in [m for m in BUILT_IN if m in args.masks]:
                spec = "heads=%d d_k=%d dtype=%s%s" % (HEADS, d, dtype,
                                                       " mask=causal" if mask == "causal" else "")
                targets = [("attnc", "host")]
                if dtype == "bf16" and limits["amx"] and limits["dot"]:
                    targets.append(("attnc x86-64-zen4", "x86-64-zen4"))
                case = make_case("built-in", d, mask, dtype, args.seq)
                table.add(case, 1, attnc_entries(spec, targets, case, work))
    return table


def written_table(rounds, args, work):
    """Table 2: the programmable masks as expressions."""
    table = tables.PeerTable(rounds, PEERS)
    for dtype in ("f32", "bf16"):
        for mask in [m for m in WRITTEN if m in args.masks]:
            spec = "heads=%d d_k=64 dtype=%s %s" % (HEADS, dtype, written_spec(mask))
            case = make_case("written", 64, mask, dtype, args.seq)
            table.add(case, 1, attnc_entries(spec, [("attnc", "host")], case, work,
                                             written_params(mask, case, work)))
    return table


def peak(limits, case, threads, products):
    """The peak of the products that ran; a peer's bf16 is judged by the best bf16 peak here."""
    if products == "AMX tiles":
        return limits["amx"]
    if products == "vdpbf16ps" or (products is None and case["dtype"] == "bf16"):
        return limits["amx"] or limits["dot"] or limits["fma"]
    return limits["fma"]


def useful_flops(case, implementation):
    return 4 * case["heads"] * case["d"] * kept_scores(case)


LEADING = (["d", "mask", "dtype"], lambda case, threads: [case["d"], case["mask"], case["dtype"]])


def main():
    args = arguments(__doc__, "d 64 only", seq=True,
                     masks=list(dict.fromkeys(BUILT_IN + WRITTEN)))
    limits = machine.measure(gemm=True)
    rounds = Rounds(args.rounds, sys.executable)
    with tempfile.TemporaryDirectory() as work:
        builtin, written = builtin_table(rounds, limits, args, work), written_table(rounds, args,
                                                                                    work)
        rounds.run()
    judge = functools.partial(peak, limits)
    print(machine.header(limits))
    print("\npeers: %s; attnc %s; %d processes a figure, alternated; 1 thread; H %d, T %d" % (
        ", ".join(sorted(set(rounds.versions.values()))), attnc.commit(), args.rounds, HEADS,
        args.seq))
    print("\n" + builtin.markdown(LEADING, useful_flops, judge, "GFLOP/s"))
    print("\nProgrammable masks (attnc expressions; FlexAttention mask_mod / score_mod; "
          "the others a mask tensor), d 64, window %d, %d documents:\n" % (WINDOW, DOCUMENTS))
    print(written.markdown(LEADING, useful_flops, judge, "GFLOP/s"))


if __name__ == "__main__":
    main()
