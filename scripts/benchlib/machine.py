"""This machine's limits, measured in the same run as the figures they judge (CPU models differ
from one VM to the next): the CPU's name, the FMA and bf16 product peaks of one core
(attnc-fma-peak), the read bandwidth (attnc-read-bandwidth) and oneDNN's matmul rates
(attnc-gemm-peak, the GEMM roofline)."""
import datetime
import os
import re
import subprocess

BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "bin")


def probe(tool, *args, threads=None):
    environment = dict(os.environ, OMP_NUM_THREADS=str(threads)) if threads else None
    return subprocess.run([os.path.join(BIN, tool), *args], capture_output=True, text=True,
                          check=True, env=environment).stdout


def rate(text, pattern):
    """The number after `pattern` in a probe's output, or None where the CPU has no such unit."""
    found = re.search(re.escape(pattern) + r"[^\n]*?: ([0-9.]+)", text)
    return float(found.group(1)) if found else None


def cpu_name():
    with open("/proc/cpuinfo") as info:
        fields = dict(line.split(":", 1) for line in info if ":" in line)
    name = " ".join(fields.get("model name\t", "unknown").split())
    family, model = fields.get("cpu family\t", "?").strip(), fields.get("model\t\t", "?").strip()
    return "%s (family %s model %s), %d cores" % (name, family, model, os.cpu_count())


def measure(gemm=False):
    fma = probe("attnc-fma-peak")
    bf16 = probe("attnc-fma-peak", "--bf16")
    bandwidth = probe("attnc-read-bandwidth")
    limits = {
        "cpu": cpu_name(),
        "date": datetime.date.today().isoformat(),
        "fma": rate(fma, "FP32 FMA peak"),
        "dot": rate(bf16, "(vdpbf16ps)"),
        "amx": rate(bf16, "(tdpbf16ps)"),
        "bandwidth_1": rate(bandwidth, "1 thread"),
        "bandwidth_all": rate(bandwidth, "%d threads" % os.cpu_count()),
    }
    if gemm:
        matmul = probe("attnc-gemm-peak", threads=1)
        limits["gemm_f32"] = rate(matmul, "f32 matmul 2048^3")
        limits["gemm_bf16"] = rate(matmul, "bf16 matmul 2048^3")
    return limits


def header(limits):
    """One paragraph naming the machine and its limits, for above a table."""
    parts = ["machine: %s; %s" % (limits["cpu"], limits["date"]),
             "FP32 FMA peak %.1f GFLOP/s a core" % limits["fma"],
             "bf16 products: vdpbf16ps %s, AMX %s GFLOP/s a core" % (
                 limits["dot"] or "none", limits["amx"] or "none"),
             "read bandwidth %.1f GB/s (1 thread), %.1f (%d threads)" % (
                 limits["bandwidth_1"], limits["bandwidth_all"], os.cpu_count())]
    if "gemm_f32" in limits:
        # oneDNN has no bf16 matmul on a CPU without bf16 units (AVX2 only).
        parts.append("oneDNN matmul 2048^3, 1 thread: f32 %s, bf16 %s GFLOP/s" % tuple(
            "none" if value is None else "%.1f" % value
            for value in (limits["gemm_f32"], limits["gemm_bf16"])))
    return "; ".join(parts)
