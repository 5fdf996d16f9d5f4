"""The package's own `attnc` executable (installed inside it, in bin/): attnc.compile, backends
and tune run it as a child process, so the compiler's two LLVMs (MLIR's 19, Halide's 14) stay out
of the Python process and a failing compile cannot take it down."""
import os
import subprocess

EXECUTABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "attnc")


class CompileError(RuntimeError):
    """`attnc compile` (or backends, tune) failed: the message is its own."""


def run(*arguments):
    """stdout of `attnc ARGUMENTS...`; CompileError with its stderr when it fails."""
    result = subprocess.run([EXECUTABLE, *arguments], capture_output=True, text=True)
    if result.returncode != 0:
        raise CompileError("attnc %s failed (exit %d): %s" % (
            arguments[0], result.returncode, result.stderr.strip() or result.stdout.strip()))
    return result.stdout


def identity():
    """What tells one installed compiler from another within a version: its size and mtime."""
    status = os.stat(EXECUTABLE)
    return "%x-%x" % (status.st_size, status.st_mtime_ns)
