"""attnc from Python: specs, kernels compiled ahead of time and cached on disk, run on numpy or
torch tensors (any DLPack array).

    import attnc
    kernel = attnc.compile("heads=8 d_k=64 mask=causal")   # compiled once, then cached
    o = kernel(q, k, v)                                    # [B, H, T, d] arrays in, o out

A bad spec raises attnc.SpecError with the CLI's message; a tensor the kernel cannot take raises
attnc.TensorError naming the tensor and the rule."""
from ._attnc import BundleError, SpecError, TensorError
from ._cache import _VERSION as __version__
from ._cache import CompileError, cache_dir, compile
from ._kernel import Argument, Kernel
from ._spec import Preset, Spec, presets
from ._tools import backends, tune

__all__ = ["Argument", "BundleError", "CompileError", "Kernel", "Preset", "Spec", "SpecError",
           "TensorError", "backends", "cache_dir", "compile", "presets", "tune"]
