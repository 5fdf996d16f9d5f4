"""attnc.Kernel: an opened bundle called on numpy or torch tensors (any DLPack array).

Positional tensors are the manifest's inputs in order (q, k, v, or q, k_pages, v_pages, ...);
every other input and parameter is given by name. The outputs are allocated as torch tensors
on the first tensor's device when it is a torch tensor, else as numpy arrays, or written into
out=; their shapes follow the manifest, each
symbol (B, Tq, Tk) taken from its first plain use among the inputs, as the runtime binds it."""
import collections
import json
import sys

from . import _attnc
from ._spec import Spec

Argument = collections.namedtuple("Argument", "name role dtypes shape doc")

_NUMPY_TYPES = {"f64": "float64", "f32": "float32", "f16": "float16", "i32": "int32",
                "i8": "int8", "u8": "uint8"}
_TORCH_TYPES = dict(_NUMPY_TYPES, bf16="bfloat16")


class Kernel:
    """A compiled attention kernel (attnc.compile returns one). Calling it runs the kernel with
    the GIL released; a kernel compiled with backward=true also has backward()."""

    def __init__(self, path, spec=None):
        self._bundle = _attnc.Bundle(path)
        self.path = path
        self.manifest = json.loads(self._bundle.manifest)
        self.spec = Spec(spec if spec is not None else self.manifest["spec"])
        self._forward = _Entry(self.manifest["arguments"])
        self.arguments = self._forward.arguments
        self.outputs = self._forward.outputs
        backward = self.manifest.get("backward")
        self._backward = _Entry(backward["arguments"]) if backward else None
        self._on_gpu = self.target.startswith("cuda")

    @property
    def target(self):
        """The target that runs here ("x86-64-avx512", "host", "cuda-sm_90", ...)."""
        return self._bundle.target

    @property
    def gradients(self):
        """The backward's outputs (grad_q, grad_k, ...), in manifest order; () without one."""
        return tuple(self._backward.outputs) if self._backward else ()

    def __repr__(self):
        return "attnc.Kernel(%r, target=%r)" % (self.spec.canonical, self.target)

    def __call__(self, *tensors, out=None, threads=0, **named):
        """Runs the kernel: kernel(q, k, v, lengths=..., out=None, threads=0). Returns the one
        output (o), or the outputs as a named tuple (o, lse, weights, q_proj, ...) in manifest
        order."""
        return self._run(self._forward, tensors, named, out, threads)

    def backward(self, *tensors, out=None, threads=0, **named):
        """Runs the backward entry (a kernel compiled with backward=true): the forward's inputs
        (q, k, v by position), its o and lse (and mha's saved projections), and grad_o, by
        name. Returns the gradients as a
        named tuple (grad_q, grad_k, grad_v, ...) in manifest order."""
        return self._run(self._backward_entry(), tensors, named, out, threads)

    def empty_outputs(self, *tensors, **named):
        """{name: output} allocated for a call on these tensors, as the call would (torch's
        fake tensors under torch.compile and torch.export get fake outputs)."""
        return self._forward.outputs_for(self._forward.inputs(tensors, named), {})

    def empty_gradients(self, *tensors, **named):
        """{name: gradient} allocated as a backward call on these tensors would."""
        entry = self._backward_entry()
        return entry.outputs_for(entry.inputs(tensors, named), {})

    def _backward_entry(self):
        if self._backward is None:
            raise _attnc.TensorError(
                "attnc: this kernel has no backward entry; compile its spec with backward=true")
        return self._backward

    def _run(self, entry, tensors, named, out, threads):
        inputs = entry.inputs(tensors, named)
        outputs = entry.outputs_for(inputs, out if out is not None else {})
        stream = _stream_of(next(iter(inputs.values()))) if self._on_gpu else 0
        backward = entry is self._backward
        self._bundle.run(_crossing(inputs), _crossing(outputs), threads, stream, backward)
        if len(entry.outputs) == 1 and not backward:
            return outputs[entry.outputs[0]]
        return entry.Outputs(**outputs)


class _Entry:
    """One of a kernel's entries: its manifest arguments, and what every call needs of them,
    worked out once (a decoding step's call costs microseconds)."""

    def __init__(self, arguments):
        self.arguments = [Argument(a["name"], a["role"], tuple(a["dtypes"]), tuple(a["shape"]),
                                   a.get("doc", "")) for a in arguments]
        self.outputs = [a.name for a in self.arguments if a.role == "output"]
        self.Outputs = collections.namedtuple("Outputs", self.outputs)
        self._takes = [a for a in self.arguments if a.role != "output"]
        self._names = [a.name for a in self._takes]
        self._positional = [a.name for a in self._takes if a.role == "input"]
        self._output_arguments = [a for a in self.arguments if a.role == "output"]
        # A gradient output (grad_<name>) is shaped as the tensor it differentiates.
        self._learned = {a.name: a.name[len("grad_"):] for a in self._output_arguments
                         if a.name.startswith("grad_")}
        self._plain_uses = [(a.name, len(a.shape), position, symbol)
                            for a in self._takes for position, symbol in enumerate(a.shape)
                            if isinstance(symbol, str) and symbol.isidentifier()]

    def inputs(self, tensors, named):
        if not named and len(tensors) == len(self._positional) == len(self._names):
            return dict(zip(self._names, tensors))  # every tensor an input, by position
        takes, positional = self._takes, self._positional
        if len(tensors) > len(positional):
            raise TypeError("attnc: %d tensors given by position; this kernel takes at most %d "
                            "(%s)" % (len(tensors), len(positional), ", ".join(positional)))
        inputs = dict(zip(positional, tensors))
        for name, tensor in named.items():
            if name in inputs:
                raise TypeError("attnc: tensor '%s' given twice" % name)
            if name not in self._names:
                raise TypeError("attnc: this kernel takes no tensor '%s'; it takes %s" % (
                    name, ", ".join(a.name for a in takes)))
            inputs[name] = tensor
        missing = [a for a in takes if a.name not in inputs]
        if missing:
            raise TypeError("attnc: missing %s" % "; ".join(
                "'%s' (%s, %s)" % (a.name, a.doc, "x".join(map(str, a.shape))) for a in missing))
        return {a.name: inputs[a.name] for a in takes}  # manifest order, as the runtime binds

    def outputs_for(self, inputs, out):
        given = out if isinstance(out, dict) else {self.outputs[0]: out}
        unknown = set(given) - set(self.outputs)
        if unknown:
            raise TypeError("attnc: out= names %s; this kernel's outputs are %s" % (
                ", ".join(sorted(unknown)), ", ".join(self.outputs)))
        sizes = self._sizes(inputs)
        first = next(iter(inputs.values()))
        outputs = {}
        for argument in self._output_arguments:
            tensor = given.get(argument.name)
            if tensor is None:
                learned = self._learned.get(argument.name)  # a broadcast bias's [1, ...]
                shape = getattr(inputs.get(learned), "shape", None) if learned else None
                tensor = _allocate(first, argument, sizes, shape)
            outputs[argument.name] = tensor
        return outputs

    def _sizes(self, inputs):
        sizes = {}
        for name, rank, position, symbol in self._plain_uses:
            if symbol not in sizes:
                shape = getattr(inputs[name], "shape", ())
                if len(shape) == rank:  # else the runtime names the wrong rank
                    sizes[symbol] = shape[position]  # a torch SymInt stays symbolic
        return sizes


def _allocate(like, argument, sizes, shape=None):
    """An output in LIKE's library and device: torch for torch tensors, numpy otherwise; SHAPE
    when given, else the manifest's."""
    if shape is not None:
        return _empty(like, argument, list(shape))
    shape = []
    for symbol in argument.shape:
        if isinstance(symbol, int):
            shape.append(symbol)
        elif symbol in sizes:
            shape.append(sizes[symbol])
        else:
            raise _attnc.TensorError(
                "attnc: the shape of output '%s' (%s) needs %s, which no input gives; pass it "
                "as out={'%s': tensor}" % (argument.name, ", ".join(map(str, argument.shape)),
                                           symbol, argument.name))
    return _empty(like, argument, shape)


def _empty(like, argument, shape):
    dtype = argument.dtypes[0]
    if _is_torch(like):
        torch = sys.modules["torch"]  # imported: LIKE is its tensor
        return torch.empty(shape, dtype=getattr(torch, _TORCH_TYPES[dtype]), device=like.device)
    import numpy
    if dtype not in _NUMPY_TYPES:
        raise _attnc.TensorError(
            "attnc: output '%s' is %s, which numpy has no type for; pass torch tensors, or the "
            "output as out=" % (argument.name, dtype))
    return numpy.empty(shape, dtype=_NUMPY_TYPES[dtype])


def _crossing(tensors):
    """The tensors as the bundle takes them. torch tensors are detached (DLPack refuses one that
    requires a gradient; the kernel only reads it), and CPU ones cross as numpy views of their
    memory (no copy): torch's __dlpack__ is written in Python and costs about 2 µs a tensor,
    Tensor.numpy() half that. bf16 (numpy has none) and GPU tensors cross by DLPack."""
    torch = sys.modules.get("torch")
    if torch is None:
        return tensors
    viewable = (torch.float32, torch.float16, torch.int32, torch.int8, torch.uint8)
    crossing = {}
    for name, tensor in tensors.items():
        if isinstance(tensor, torch.Tensor):
            tensor = tensor.detach()
            if tensor.is_cpu and tensor.dtype in viewable:
                tensor = tensor.numpy()
        crossing[name] = tensor
    return crossing


def _is_torch(tensor):
    return type(tensor).__module__.startswith("torch")


def _stream_of(tensor):
    """The current CUDA stream of a torch tensor on a GPU (GPU bundles launch on it), else 0."""
    if _is_torch(tensor) and tensor.is_cuda:
        return sys.modules["torch"].cuda.current_stream(tensor.device).cuda_stream
    return 0
