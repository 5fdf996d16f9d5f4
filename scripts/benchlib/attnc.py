"""attnc's side of a peer table: compile a spec into a bundle once, name the products its code
multiplies with (from the assembly), and the argv of one `attnc bench` process per figure."""
import os
import subprocess

import numpy

ATTNC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "bin",
                     "attnc")


def compile_spec(spec, directory, target, emit, suffix, backend="auto"):
    output = subprocess.run([ATTNC, "compile", spec, "--target", target, "--backend", backend,
                             "-o", directory, "--emit", emit], capture_output=True, text=True)
    if output.returncode != 0:
        raise RuntimeError("attnc compile %r failed: %s" % (spec, output.stderr.strip()))
    return next(line for line in output.stdout.splitlines() if line.endswith(suffix))


def compile_bundle(spec, directory, target="host", backend="auto"):
    """The bundle as users get it (`--emit so` alone: a compile that also emits assembly builds
    the prefill kernel only, without the decode kernel)."""
    return compile_spec(spec, directory, target, "so", ".so", backend)


def products(spec, directory, target="host"):
    """How the spec's prefill kernel multiplies, read from its assembly (compiled apart into
    DIRECTORY/asm): AMX tiles, AVX512-BF16 dot products or f32 FMAs."""
    with open(compile_spec(spec, os.path.join(directory, "asm"), target, "asm", ".s")) as f:
        text = f.read()
    if "tdpbf16ps" in text:
        return "AMX tiles"
    if "vdpbf16ps" in text:
        return "vdpbf16ps"
    return "f32 FMA"


def bench_argv(bundle, tq, tk, threads, runs, flush=False, extra=()):
    argv = [ATTNC, "bench", bundle, "--seq-q", str(tq), "--seq-k", str(tk), "--threads",
            str(threads), "--runs", str(runs), "--no-baseline", "--json", *extra]
    return argv + (["--flush-caches"] if flush else [])


def npy(directory, name, array):
    """`array` saved as NAME.npy in `directory`: its path (`attnc bench --bias PATH`)."""
    path = os.path.join(directory, name + ".npy")
    numpy.save(path, array)
    return path


def save(directory, name, array):
    """An aux tensor for `attnc bench --param NAME=PATH`."""
    return "%s=%s" % (name, npy(directory, name, array))


def commit():
    top = os.path.dirname(ATTNC)
    return subprocess.run(["git", "-C", top, "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
