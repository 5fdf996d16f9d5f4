"""attnc::attention, attnc's kernels as a PyTorch operator (torch.library.custom_op with a fake
implementation), so torch.compile(fullgraph=True) keeps it in its graph and torch.export exports
it. The kernel runs on torch's thread count (torch.set_num_threads). The spec's kernel is
compiled once for the tensors' device (the CPU: the host; a GPU: its cuda-sm_XY) and cached on
disk; sequence lengths are run-time sizes, so they never recompile.

Gradients: where one is asked (a tensor requires it and grad mode is on), the forward also
returns lse, which the backward reads, and on the CPU an mha's forward also its projections and
heads' output (save_projections), which the backward then reads instead of recomputing them
(the caller still gets only the outputs it asked for), and
autograd's backward runs the backward entry of the spec compiled with backward=true (on the CPU
by the reference backend where no fused backend builds it yet) through a second operator,
attnc::attention_backward, so torch.compile traces it too. It gives q's, k's and v's
gradients and those of every float tensor passed by name (bias, sinks, aux tables, mha's
weights); dL/dlse and dL/dweights are refused (the backward entry takes dL/do only).

An eager call that nothing observes runs the kernel without the dispatcher: a custom op's first
call imports Dynamo (1.5 s here) and every call costs tens of microseconds in its Python
layers. Under torch.compile, torch.export or torch.jit.trace, with a gradient asked, on tensor
subclasses (fake and functional tensors), under torch.func's transforms, a torch function or
dispatch mode or the profiler, the call goes through attnc::attention, so tracing, autograd,
modes and profiles see the operator."""
import functools
from typing import Optional

import torch

from ._cache import compile as _compile
from ._tools import backends as _backends
from ._spec import Spec

# torch's dtypes as a spec's dtype= values
SPEC_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


def attention(q, k, v, spec, **tensors):
    """The attention SPEC describes (text, dict or attnc.Spec) of q, k and v (the manifest's
    first three inputs: k_pages and v_pages for a paged cache), with its other inputs by name
    (lengths, mask, bias, seq_lens, block_table, aux tensors, ...). Returns o, or the tuple
    (o, lse, weights, q_proj, k_proj, v_proj, o_heads) of the outputs the spec asks for, in
    that order."""
    text = spec if isinstance(spec, str) else Spec(spec).canonical
    if _unobserved((q, k, v, *tensors.values())):
        outputs = _run(q, k, v, text, tensors)
    else:
        names = sorted(tensors)
        asked, hidden_lse, hidden_saved = text, False, False
        if torch.is_grad_enabled() and any(
                t.requires_grad for t in (q, k, v, *tensors.values()) if torch.is_tensor(t)):
            asked, hidden_lse, hidden_saved = _for_training(text, q.device.type)
        outputs = torch.ops.attnc.attention(q, k, v, asked, ",".join(names),
                                            [tensors[n] for n in names])
        if hidden_saved:
            outputs = outputs[:-len(SAVED_PROJECTIONS)]
        if hidden_lse:
            outputs = [outputs[0], *outputs[2:]]
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _constant_under_compile(function):
    """torch.compiler.assume_constant_result, which makes Dynamo call FUNCTION and take its
    result as a constant rather than trace it (it calls the spec parser, which Dynamo cannot
    trace), without importing Dynamo: the mark that call sets. (The public call imports
    torch._dynamo, which an eager call must not.)"""
    function._dynamo_marked_constant = True
    return function


@functools.lru_cache(maxsize=None)
def _keys(text):
    """The spec's keys, parsed once per text."""
    return Spec(text).to_json()


# mha's outputs under save_projections, the last in the manifest, which the backward reads
SAVED_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_heads")

_training_specs = {}  # (spec text, device type) -> _for_training's result


@_constant_under_compile
def _for_training(text, device_type):
    """The spec the forward runs when a gradient is asked: with lse=true, which its backward
    reads (but for linear attention, which has no softmax), and on the CPU, for an mha whose
    backward the MLIR backend builds, with save_projections=true, so the backward reads the
    forward's projections and heads' output instead of recomputing them (a forward's work less;
    GPUs keep f16 and bf16 heads, which the key's f32 tensors do not hold). Then whether lse and
    the projections were added (the caller sees neither)."""
    found = _training_specs.get((text, device_type))
    if found is None:
        keys = dict(_keys(text))
        added_lse = keys["variant"] != "linear" and not keys.get("lse", False)
        if added_lse:
            keys["lse"] = True
        saved = (device_type == "cpu" and keys["variant"] == "mha"
                 and not keys.get("save_projections", False)
                 and _backends(dict(keys, save_projections=True, backward=True))["auto"]
                 is not None)
        if saved:
            keys["save_projections"] = True
        found = _training_specs[(text, device_type)] = (
            Spec(keys).canonical if added_lse or saved else text, added_lse, saved)
    return found


@functools.lru_cache(maxsize=None)
def _backward_spec(text, device_type):
    """The spec with its backward entry (backward=true: attnc.SpecError says why a spec cannot
    have one, a KV cache's), and the backend that builds it: on the CPU the reference backend
    (f64: correct, slow) where no fused backend builds this one (the MLIR backend builds
    sdpa's in f32: docs/spec.md, "Backward")."""
    trained = Spec(dict(_keys(text), backward=True)).canonical
    if device_type == "cpu" and _backends(trained)["auto"] is None:
        return trained, "reference"
    return trained, "auto"


def _backward_kernel_for(text, device):
    """The bundle whose backward entry takes the gradients of SPEC's forward on DEVICE."""
    trained, backend = _backward_spec(text, device.type)
    if device.type == "cpu":
        return _compile(trained, backend=backend)
    return _kernel_for(trained, device)


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


def _forward_outputs(o, lse, saved):
    """What the backward entry reads of the forward's outputs, by name."""
    forward = {"o": o} if lse is None else {"o": o, "lse": lse}
    forward.update(zip(SAVED_PROJECTIONS, saved))
    return forward


@torch.library.custom_op("attnc::attention_backward", mutates_args=())
def _attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                        lse: Optional[torch.Tensor], saved: list[torch.Tensor],
                        grad_o: torch.Tensor, spec: str, names: str,
                        tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    kernel = _backward_kernel_for(spec, q.device)
    return list(kernel.backward(q, k, v, threads=torch.get_num_threads(), grad_o=grad_o,
                                **_forward_outputs(o, lse, saved), **_named(names, tensors)))


@_attention_backward.register_fake
def _(q, k, v, o, lse, saved, grad_o, spec, names, tensors):
    return list(_backward_kernel_for(spec, q.device).empty_gradients(
        q, k, v, grad_o=grad_o, **_forward_outputs(o, lse, saved),
        **_named(names, tensors)).values())


def _setup_context(ctx, inputs, output):
    q, k, v, spec, names, tensors = inputs
    ctx.spec, ctx.names = spec, names
    # o, lse where the spec returns it (attention() asks for it but for linear attention), and
    # mha's projections where it saves them (the manifest's last outputs)
    keys = _keys(spec)
    ctx.has_lse = bool(keys.get("lse"))
    ctx.saved_count = len(SAVED_PROJECTIONS) if keys.get("save_projections") else 0
    ctx.save_for_backward(q, k, v, *output[:2 if ctx.has_lse else 1],
                          *output[len(output) - ctx.saved_count:], *tensors)
    ctx.set_materialize_grads(False)


def _backward(ctx, gradients):
    if any(g is not None for g in gradients[1:]):
        raise RuntimeError(
            "attnc::attention: the backward entry takes dL/do only; a loss that reads any output "
            "but o (lse, weights, mha's saved projections) has no gradient through attnc's "
            "kernels")
    saved = ctx.saved_tensors
    q, k, v, o = saved[:4]
    lse = saved[4] if ctx.has_lse else None
    first = 5 if ctx.has_lse else 4
    projections = list(saved[first:first + ctx.saved_count])
    tensors = list(saved[first + ctx.saved_count:])
    computed = _attention_backward(q, k, v, o, lse, projections, gradients[0], ctx.spec,
                                   ctx.names, tensors)
    # The gradients follow the manifest: q, k, v, then the named tensors a model may learn.
    by_name = dict(zip(_backward_kernel_for(ctx.spec, q.device).gradients, computed))
    named = [by_name.get("grad_" + n) for n in _named(ctx.names, tensors)]
    return by_name["grad_q"], by_name["grad_k"], by_name["grad_v"], None, None, named


torch.library.register_autograd("attnc::attention", _backward, setup_context=_setup_context)
