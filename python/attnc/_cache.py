"""attnc.compile: a spec's bundle from the on-disk kernel cache, compiled on a miss.

The cache is a folder per bundle, named by spec hash, backend, target, attnc's version and the
installed compiler's identity, in $ATTNC_KERNEL_CACHE, else $XDG_CACHE_HOME/attnc/kernels (else
~/.cache/attnc/kernels). A compile writes into a temporary folder beside it and renames it into
place, so another process sees a whole bundle or none; when two compile the same spec at once,
the first rename wins and the other's copy is dropped. Within a process, a compiled kernel is
kept and returned again."""
import functools
import glob
import hashlib
import importlib.metadata
import os
import re
import shutil
import tempfile
import threading

from . import _attnc, _cli
from ._kernel import Kernel
from ._spec import Spec

CompileError = _cli.CompileError
_VERSION = importlib.metadata.version("attnc")

_opened = {}  # cache key -> Kernel
_by_text = {}  # (spec text as given, backend, target) -> Kernel: a call's path without parsing
_lock = threading.Lock()


def cache_dir():
    """Where compiled bundles are kept (ATTNC_KERNEL_CACHE moves it)."""
    configured = os.environ.get("ATTNC_KERNEL_CACHE")
    if configured:
        return configured
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(home, "attnc", "kernels")


def compile(spec, backend="auto", target="host"):
    """The kernel of SPEC (text, dict or attnc.Spec) for TARGET, from the cache when it holds
    one, else compiled by `attnc compile --backend BACKEND --target TARGET` and cached. Raises
    attnc.SpecError for a bad spec and attnc.CompileError when compiling fails."""
    given = (spec, backend, target) if isinstance(spec, str) else None
    kernel = _by_text.get(given)
    if kernel is not None:
        return kernel
    spec = Spec(spec)
    key = _key(spec, backend, target)
    with _lock:
        kernel = _opened.get(key)
        if kernel is None:
            kernel = _open_cached(spec, backend, target, key)
            _opened[key] = kernel
        if given is not None:
            _by_text[given] = kernel
    return kernel


def forget(spec):
    """Drops SPEC's kernels from this process and from the disk cache, so the next compile
    builds them again (attnc.tune calls it: a tuned schedule makes another bundle)."""
    prefix = Spec(spec).hash + "-"
    with _lock:
        for cache in (_opened, _by_text):
            for key in [key for key, kernel in cache.items() if kernel.spec.hash + "-" == prefix]:
                del cache[key]
        for entry in glob.glob(os.path.join(cache_dir(), prefix + "*")):
            shutil.rmtree(entry, ignore_errors=True)


def _key(spec, backend, target):
    if target == "host":  # a cache shared by machines keeps each CPU's own bundles
        target = "host_" + _host_identity()
    name = "%s-%s-%s-%s-%s" % (spec.hash, backend, target, _VERSION, _cli.identity())
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


@functools.cache
def _host_identity():
    """This CPU's architecture and features (the runtime's reading of them), hashed: what a
    host bundle is built for."""
    arch, features = _attnc.host_cpu()
    return hashlib.sha256(" ".join([arch, *sorted(features)]).encode()).hexdigest()[:12]


def _open_cached(spec, backend, target, key):
    """The cached bundle opened; one that no longer opens (a host bundle built on another CPU,
    a damaged file) is compiled again. A named target this machine lacks (a GPU's, another
    ISA's) is refused as it is: compiling it again would not make it run here."""
    entry = os.path.join(cache_dir(), key)
    if os.path.isdir(entry):
        try:
            return Kernel(_bundle_in(entry), spec)
        except _attnc.BundleError as refusal:
            if target != "host" and str(refusal).startswith("unsupported target"):
                raise
            shutil.rmtree(entry, ignore_errors=True)
        except FileNotFoundError:
            shutil.rmtree(entry, ignore_errors=True)
    _compile_into(entry, spec, backend, target)
    return Kernel(_bundle_in(entry), spec)


def _bundle_in(folder):
    bundles = glob.glob(os.path.join(folder, "*.so"))
    if len(bundles) != 1:
        raise FileNotFoundError("%s holds %d bundles, not one" % (folder, len(bundles)))
    return bundles[0]


def _compile_into(entry, spec, backend, target):
    os.makedirs(os.path.dirname(entry), exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".compiling-", dir=os.path.dirname(entry))
    try:
        _cli.run("compile", spec.canonical, "--backend", backend, "--target", target,
                 "-o", staging)
        os.chmod(staging, 0o755)  # mkdtemp's 0700 would hide it from a shared cache's users
        os.rename(staging, entry)
    except OSError:
        if not os.path.isdir(entry):  # not another process's copy renamed first
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
