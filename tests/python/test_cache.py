"""attnc.compile's on-disk kernel cache: one compile per spec, target and backend, shared by
processes, moved by ATTNC_KERNEL_CACHE, and a damaged entry compiled again."""
import glob
import os
import subprocess
import sys

import pytest

import attnc

SPEC = "heads=2 kv_heads=1 d_k=8 mask=causal"

# A child process that must not compile: attnc's CLI replaced by a failure.
NO_COMPILE = """
import attnc, attnc._cli, numpy
def refuse(*arguments):
    raise AssertionError("compiled: attnc " + " ".join(arguments))
attnc._cli.run = refuse
q = numpy.ones((1, 2, 3, 8), numpy.float32)
k = numpy.ones((1, 1, 3, 8), numpy.float32)
print(attnc.compile(%r)(q, k, k).sum())
"""


def child(source, **environment):
    return subprocess.run([sys.executable, "-c", source], capture_output=True, text=True,
                          env={**os.environ, **environment})


def test_a_second_call_returns_the_same_kernel():
    assert attnc.compile(SPEC) is attnc.compile(attnc.Spec(SPEC))
    assert attnc.compile(SPEC) is not attnc.compile(SPEC, backend="reference")


def test_the_bundle_lies_in_the_cache_folder_under_its_spec_hash():
    kernel = attnc.compile(SPEC)
    assert os.path.dirname(os.path.dirname(kernel.path)) == attnc.cache_dir()
    assert os.path.basename(os.path.dirname(kernel.path)).startswith(attnc.Spec(SPEC).hash)
    assert not glob.glob(os.path.join(attnc.cache_dir(), ".compiling-*"))


def test_another_process_loads_the_cached_bundle_without_compiling():
    attnc.compile(SPEC)
    result = child(NO_COMPILE % SPEC)
    assert result.returncode == 0, result.stderr
    assert float(result.stdout) == pytest.approx(2 * 3 * 8)


def test_the_environment_variable_moves_the_cache(tmp_path):
    result = child(NO_COMPILE % SPEC, ATTNC_KERNEL_CACHE=str(tmp_path))
    assert "compiled: attnc compile" in result.stderr and not os.listdir(tmp_path)


def test_a_damaged_bundle_is_compiled_again(tmp_path):
    compile_once = "import attnc; print(attnc.compile(%r).path)" % SPEC
    first = child(compile_once, ATTNC_KERNEL_CACHE=str(tmp_path))
    path = first.stdout.strip()
    with open(path, "wb") as bundle:
        bundle.write(b"not a bundle")
    second = child(compile_once, ATTNC_KERNEL_CACHE=str(tmp_path))
    assert second.returncode == 0, second.stderr
    assert os.path.getsize(second.stdout.strip()) > 1000


def test_a_target_this_machine_lacks_is_refused_without_compiling_again(monkeypatch):
    try:
        attnc.compile(SPEC, target="cuda-sm_80")
        pytest.skip("this machine runs CUDA bundles")
    except attnc.BundleError as refusal:
        assert "unsupported target" in str(refusal) and "NVIDIA" in str(refusal)
    monkeypatch.setattr(attnc._cli, "run", lambda *arguments: pytest.fail("compiled again"))
    monkeypatch.setattr(attnc._cache, "_by_text", {})
    with pytest.raises(attnc.BundleError, match="unsupported target"):
        attnc.compile(SPEC, target="cuda-sm_80")


def test_a_failed_compile_raises_compile_error_and_caches_nothing():
    with pytest.raises(attnc.CompileError, match="attnc compile failed.*nonsense"):
        attnc.compile(SPEC, target="nonsense")
    assert not [entry for entry in os.listdir(attnc.cache_dir()) if "nonsense" in entry]
