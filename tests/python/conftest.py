"""The Python package's tests (pytest, run by scripts/test against the package it installed into
attnc's venv). Every test compiles into one kernel cache of its session's own, never the
user's, and torch.compile into an Inductor cache of the session's own: its cached graphs keep
the attnc operators' calls as an earlier attnc traced them (an operator's schema changed under
a cached graph fails its call)."""
import numpy
import pytest

import attnc


@pytest.fixture(scope="session", autouse=True)
def kernel_cache(tmp_path_factory):
    """The session's own kernel and Inductor caches, and no tuning records (compile gives the
    same bundles anywhere, as in the CLI tests)."""
    folder = tmp_path_factory.mktemp("kernels")
    patcher = pytest.MonkeyPatch()
    patcher.setenv("ATTNC_KERNEL_CACHE", str(folder))
    patcher.setenv("ATTNC_TUNING_DB", str(folder / "no-tuning.db"))
    patcher.setenv("ATTNC_SYSTEM_TUNING_DB", "")
    patcher.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path_factory.mktemp("inductor")))
    yield folder
    patcher.undo()


@pytest.fixture(scope="session")
def reference_of():
    """The f64 reference's outputs for a spec and its inputs: the same call on the reference
    backend's bundle (computed in f64, stored in the spec's dtype)."""
    def run(spec, *tensors, **named):
        return attnc.compile(spec, backend="reference")(*tensors, **named)
    return run


def random_qkv(rng, batch, heads, kv_heads, seq_q, seq_k, d, dtype=numpy.float32):
    """q [B, H, Tq, d], k and v [B, H_kv, Tk, d] (bhsd), normal."""
    q = rng.standard_normal((batch, heads, seq_q, d)).astype(dtype)
    k = rng.standard_normal((batch, kv_heads, seq_k, d)).astype(dtype)
    v = rng.standard_normal((batch, kv_heads, seq_k, d)).astype(dtype)
    return q, k, v
