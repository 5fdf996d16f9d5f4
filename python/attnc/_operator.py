"""attnc::attention, attnc's kernels as a PyTorch operator (torch.library.custom_op with a fake
implementation), so torch.compile(fullgraph=True) keeps it in its graph and torch.export exports
it. The kernel runs on torch's thread count (torch.set_num_threads). The spec's kernel is
compiled once for the tensors' device (the CPU: the host; a GPU: its cuda-sm_XY) and cached on
disk; sequence lengths are run-time sizes, so they never recompile. There is no backward yet:
backward raises an error saying so.

An eager call that nothing observes runs the kernel without the dispatcher: a custom op's first
call imports Dynamo (1.5 s here) and every call costs tens of microseconds in its Python
layers. Under torch.compile, torch.export or torch.jit.trace, with a gradient asked, on tensor
subclasses (fake and functional tensors), under torch.func's transforms, a torch function or
dispatch mode or the profiler, the call goes through attnc::attention, so tracing, autograd,
modes and profiles see the operator."""
import torch

from ._cache import compile as _compile
from ._spec import Spec

# torch's dtypes as a spec's dtype= values
SPEC_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


def attention(q, k, v, spec, **tensors):
    """The attention SPEC describes (text, dict or attnc.Spec) of q, k and v (the manifest's
    first three inputs: k_pages and v_pages for a paged cache), with its other inputs by name
    (lengths, mask, bias, seq_lens, block_table, aux tensors, ...). Returns o, or the tuple
    (o, lse, weights) of the outputs the spec asks for, in that order."""
    text = spec if isinstance(spec, str) else Spec(spec).canonical
    if _unobserved((q, k, v, *tensors.values())):
        outputs = _run(q, k, v, text, tensors)
    else:
        names = sorted(tensors)
        outputs = torch.ops.attnc.attention(q, k, v, text, ",".join(names),
                                            [tensors[n] for n in names])
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _unobserved(tensors):
    """Whether an eager call may run the kernel directly (the module's docstring says why)."""
    if (torch.compiler.is_compiling() or torch._C._is_torch_function_mode_enabled()
            or torch._C._len_torch_dispatch_stack() or torch.autograd._profiler_enabled()
            or torch._C._get_tracing_state() is not None  # torch.jit.trace, onnx's exporter
            or torch._C._functorch.maybe_current_level() is not None  # vmap, grad, jvp
            or torch.autograd.forward_ad._current_level >= 0):  # dual tensors
        return False
    gradients = torch.is_grad_enabled()
    for tensor in tensors:  # a loop, not all(): this runs at every call
        if type(tensor) is not torch.Tensor or (gradients and tensor.requires_grad):
            return False
    return True


def _run(q, k, v, spec, named):
    """The kernel's outputs as the operator returns them: a list."""
    kernel = _kernel_for(spec, q.device)
    outputs = kernel(q, k, v, threads=torch.get_num_threads(), **named)
    return [outputs] if len(kernel.outputs) == 1 else list(outputs)


def _named(names, tensors):
    """The operator's names (one string: a schema has no list of strings) with their tensors."""
    return dict(zip(names.split(","), tensors)) if names else {}


def _kernel_for(spec, device):
    if device.type == "cpu":
        return _compile(spec)
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        return _compile(spec, target="cuda-sm_%d%d" % (major, minor))
    raise ValueError("attnc::attention: no kernels for %s tensors; attnc compiles for CPUs and "
                     "NVIDIA GPUs (cpu and cuda tensors)" % device.type)


@torch.library.custom_op("attnc::attention", mutates_args=())
def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, spec: str, names: str,
               tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    return _run(q, k, v, spec, _named(names, tensors))


@_attention.register_fake
def _(q, k, v, spec, names, tensors):
    """The outputs' shapes and dtypes from the kernel's manifest (compiled, or loaded from the
    cache, while tracing)."""
    return list(_kernel_for(spec, q.device).empty_outputs(q, k, v, **_named(names, tensors))
                .values())


def _no_backward(ctx, *gradients):
    raise RuntimeError(
        "attnc::attention has no backward yet: attnc compiles the forward pass only; compute "
        "gradients with torch's own attention until attnc's backward kernels land")


torch.library.register_autograd("attnc::attention", _no_backward)
