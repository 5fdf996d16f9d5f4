"""FlexAttention's callables traced into attnc's expression language (docs/spec.md,
"Expressions"): score_mod(score, b, h, q_idx, kv_idx) and mask_mod(b, h, q_idx, kv_idx) are
called once on symbolic values, whose operators and torch functions (through
__torch_function__) write the expression's text.

What a callable captures becomes the spec's run-time values: a tensor it indexes (a bias table,
document ids) an `aux` tensor passed at each call, a number bound in its closure or globals a
`params` scalar, both named after the variable (a literal equal to such a number reads as it
too: the two cannot be told apart, and the value is the same). Every index into a captured
tensor is clamped into its dimension: attnc proves each read in bounds when it compiles, and
FlexAttention leaves an out-of-range read undefined, so the clamp changes nothing a correct
callable computes. A negative index counts from the end, as torch's indexing does. An
operation the language cannot express raises TraceError naming it."""
import math
import numbers
import re
import threading

import torch


class TraceError(TypeError):
    """A score_mod or mask_mod that attnc's expression language cannot express."""


class Captures:
    """The tensors and numbers one trace captured: aux tensors and params, named after the
    variables that held them (closure cells and globals of the traced callables)."""

    def __init__(self, callables, sizes):
        self.sizes = sizes  # {"Tq": ..., "Tk": ...}: a tensor dimension of that size reads as it
        self.names = {}  # id(value) -> variable name, and numbers by value
        self._learned = set()
        for function in callables:
            self._learn_names(function)
        self.params = {}  # name -> number
        self.aux = {}  # name -> (tensor, declaration)
        self._aux_of = {}  # id(tensor) -> name
        self._held = []

    def _learn_names(self, function):
        """The names FUNCTION binds, and those of the functions it calls (a score_mod built of
        others, and_masks' list of masks)."""
        code = getattr(function, "__code__", None)
        if code is None or id(function) in self._learned:
            return
        self._learned.add(id(function))
        cells = zip(code.co_freevars, function.__closure__ or ())
        bound = [(name, cell.cell_contents) for name, cell in cells if _filled(cell)]
        bound += [(name, function.__globals__[name]) for name in code.co_names
                  if name in function.__globals__]
        for name, value in bound:
            if isinstance(value, torch.Tensor):
                self.names.setdefault(id(value), name)
            elif isinstance(value, numbers.Real) and not isinstance(value, bool):
                self.names.setdefault(_number_key(value), name)
            for inner in value if isinstance(value, (tuple, list)) else (value,):
                if callable(inner):
                    self._learn_names(inner)

    def number(self, value):
        """A Python number's text: a captured one as a param, any other as a literal."""
        if isinstance(value, bool):
            return Expr("true" if value else "false", "bool")
        value = int(value) if isinstance(value, numbers.Integral) else float(value)  # numpy's too
        kind = "int" if isinstance(value, int) else "float"
        name = self.names.get(_number_key(value))
        if name is not None and math.isfinite(value):
            return Expr(self._param(name, value), kind)
        return Expr(_literal(value), kind)

    def _param(self, name, value):
        key = self._unique("f_" + name, lambda n: self.params.get(n, value) == value)
        self.params[key] = value
        return key

    def tensor(self, tensor, original=None):
        """A captured tensor's aux name, declared once: float tensors as f32, others as i32.
        ORIGINAL: the tensor the callable holds, when TENSOR is a view of it."""
        key = id(original if original is not None else tensor)
        name = self._aux_of.get(key)
        if name is None:
            name = self._unique("f_" + self.names.get(key, "tensor"), lambda n: False)
            element = "f32" if tensor.is_floating_point() else "i32"
            dims = ",".join(self.dimension(extent) for extent in tensor.shape)
            self.aux[name] = (tensor, "%s:%s[%s]" % (name, element, dims))
            self._aux_of[key] = name
            if original is not None:  # its id names the aux: it must outlive the trace
                self._held.append(original)
        return name

    def keep_only_read(self, text):
        """Drops the params and aux tensors TEXT does not read (an intermediate value the
        callable computed and discarded): a spec refuses names no expression reads."""
        read = set(re.findall(r"[A-Za-z_]\w*", text))
        self.params = {name: value for name, value in self.params.items() if name in read}
        self.aux = {name: entry for name, entry in self.aux.items() if name in read}

    def dimension(self, extent):
        """A dimension as the kernel's size it equals (Tk first), so other lengths reuse the
        kernel, else as its number."""
        for symbol in ("Tk", "Tq"):
            if self.sizes.get(symbol) == extent:
                return symbol
        return str(extent)

    def _unique(self, name, fits):
        taken = set(self.params) | set(self.aux)
        candidate, suffix = name, 1
        while candidate in taken and not fits(candidate):
            suffix += 1
            candidate = "%s_%d" % (name, suffix)
        return candidate


def _number_key(value):
    """A captured number's key: Python's int or float of it (numpy scalars alike)."""
    return ("int", int(value)) if isinstance(value, numbers.Integral) else ("float", float(value))


def _filled(cell):
    try:
        cell.cell_contents
        return True
    except ValueError:
        return False


def _literal(value):
    if math.isnan(value):
        return "(0.0 / 0.0)"
    if math.isinf(value):
        return "(%s1.0 / 0.0)" % ("-" if value < 0 else "")
    text = repr(value)
    return "(%s)" % text if text.startswith("-") else text


class Expr:
    """A traced value: its text in attnc's expression language and its type (int, float or
    bool). Operators and torch functions on it build bigger expressions; branching on it
    (`if`, `and`, `or`, `not`) cannot be traced and raises TraceError."""

    def __init__(self, text, kind):
        self.text, self.kind = text, kind

    __hash__ = object.__hash__

    def __bool__(self):
        raise TraceError("a branch on a traced value (if, and, or, not, a Python comparison "
                         "chain): write it with torch.where, & and |")

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return call(func, args, kwargs or {})

    def __getattr__(self, name):  # tensor methods: x.abs(), score.tanh(), b.new_ones(()) ...
        if name.startswith("__"):
            raise AttributeError(name)
        if not callable(getattr(torch.Tensor, name, None)):
            raise TraceError("%s.%s of a traced value: it is one number per score, with no "
                             "shape, dtype or device to read" % (self.text, name))
        return lambda *args, **kwargs: call(getattr(torch.Tensor, name), (self, *args), kwargs)


def _unsupported(operator):
    def refuse(*operands):
        raise TraceError("'%s': attnc's expressions have no bitwise operators or powers but "
                         "squares (bit(x, i) reads one bit; exp and log write powers)" % operator)
    return refuse


for _name, _operator in (("xor", "^"), ("rxor", "^"), ("lshift", "<<"), ("rlshift", "<<"),
                         ("rshift", ">>"), ("rrshift", ">>"), ("rpow", "**")):
    setattr(Expr, "__%s__" % _name, _unsupported(_operator))


def _numeric(x):
    """X with a bool read as 0 or 1, as torch promotes bools in arithmetic."""
    return Expr("where(%s, 1, 0)" % x.text, "int") if x.kind == "bool" else x


def _binary(operator, result=None, ints_only=False):
    def apply(a, b):
        a, b = coerce(a), coerce(b)
        if a.kind != b.kind or result != "bool":  # bool == bool stays a comparison of bools
            a, b = _numeric(a), _numeric(b)
        if ints_only and "float" in (a.kind, b.kind):
            raise TraceError("'%s' of floats: attnc's %s takes ints" % (operator, operator))
        kind = result or ("float" if "float" in (a.kind, b.kind) else "int")
        return Expr("(%s %s %s)" % (a.text, operator, b.text), kind)
    return apply


def _logical(operator):
    def apply(a, b):
        a, b = coerce(a), coerce(b)
        if a.kind != "bool" or b.kind != "bool":
            raise TraceError("'%s' of %s and %s: attnc has no bitwise operators on ints (bit(x, "
                             "i) reads one bit)" % (operator, a.kind, b.kind))
        return Expr("(%s %s %s)" % (a.text, "&&" if operator == "&" else "||", b.text), "bool")
    return apply


def _reflected(apply):
    return lambda a, b: apply(b, a)


_OPERATORS = {
    "add": _binary("+"), "sub": _binary("-"), "mul": _binary("*"),
    "truediv": _binary("/", "float"), "div": _binary("/", "float"),
    "floordiv": _binary("//", ints_only=True), "floor_divide": _binary("//", ints_only=True),
    "mod": _binary("%", ints_only=True), "remainder": _binary("%", ints_only=True),
    "lt": _binary("<", "bool"), "le": _binary("<=", "bool"), "gt": _binary(">", "bool"),
    "ge": _binary(">=", "bool"), "eq": _binary("==", "bool"), "ne": _binary("!=", "bool"),
    "and": _logical("&"), "or": _logical("|"),
    "logical_and": _logical("&"), "logical_or": _logical("|"),
}
for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "lt", "le", "gt", "ge", "eq",
              "ne", "and", "or"):
    setattr(Expr, "__%s__" % _name, _OPERATORS[_name])
for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "and", "or"):
    setattr(Expr, "__r%s__" % _name, _reflected(_OPERATORS[_name]))
for _name, _alias in (("less", "lt"), ("less_equal", "le"), ("greater", "gt"),
                      ("greater_equal", "ge"), ("not_equal", "ne"), ("subtract", "sub"),
                      ("multiply", "mul"), ("divide", "div"), ("true_divide", "truediv")):
    _OPERATORS[_name] = _OPERATORS[_alias]


def _function(name, result=None):
    """name(x): float functions give floats, abs keeps its operand's type, floor gives an int."""
    def apply(x):
        x = coerce(x)
        if x.kind == "bool":
            raise TraceError("%s of a bool" % name)
        return Expr("%s(%s)" % (name, x.text), result or x.kind)
    return apply


def _negate(x):
    x = coerce(x)
    if x.kind == "bool":
        raise TraceError("-%s of a bool: write ~ for not" % x.text)
    return Expr("(-%s)" % x.text, x.kind)


def _not(x):
    x = coerce(x)
    if x.kind != "bool":
        raise TraceError("~ or logical_not of an %s: attnc's expressions have no bitwise "
                         "operators (compare it, as x == 0)" % x.kind)
    return Expr("(!%s)" % x.text, "bool")


def _where(condition, a, b):
    condition, a, b = coerce(condition), coerce(a), coerce(b)
    if condition.kind != "bool":
        raise TraceError("torch.where's condition is %s, not bool" % condition.kind)
    if a.kind != b.kind:
        a, b = _numeric(a), _numeric(b)
    kind = a.kind if a.kind == b.kind else "float"
    return Expr("where(%s, %s, %s)" % (condition.text, a.text, b.text), kind)


def _two(name):
    def apply(a, b):
        a, b = _numeric(coerce(a)), _numeric(coerce(b))
        kind = "float" if "float" in (a.kind, b.kind) else "int"
        return Expr("%s(%s, %s)" % (name, a.text, b.text), kind)
    return apply


def _clamp(x, min=None, max=None):
    x = coerce(x)
    if min is not None:
        x = _two("max")(x, min)
    if max is not None:
        x = _two("min")(x, max)
    return x


def _power(x, exponent):
    if not isinstance(exponent, Expr) and exponent == 2:
        x = coerce(x)
        return _OPERATORS["mul"](x, x)
    raise TraceError("x ** %s: attnc's expressions have no power but squares (exp and log "
                     "write the rest)" % getattr(exponent, "text", repr(exponent)))


def _constant(like, value, dtype):
    """VALUE in LIKE's type, or DTYPE's: what new_ones, zeros_like, full_like ... make of one
    score (their sizes are one element here)."""
    kind = coerce(like).kind
    if dtype is torch.bool or (dtype is None and kind == "bool"):
        return Expr("true" if value else "false", "bool")
    floats = dtype in _FLOAT_TYPES or (dtype is None and kind == "float")
    return _running.captures.number(float(value) if floats else int(value))


def _new_constant(value):  # x.new_ones(size, dtype=...), x.new_zeros(size, dtype=...)
    return lambda like, size=(), dtype=None, **ignored: _constant(like, value, dtype)


def _constant_like(value):  # torch.ones_like(x, dtype=...), torch.zeros_like(x, dtype=...)
    return lambda like, dtype=None, **ignored: _constant(like, value, dtype)


def _to_float(x, *ignored):
    x = coerce(x)
    return x if x.kind == "float" else Expr("(%s * 1.0)" % x.text, "float")


_FLOAT_TYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)

_FUNCTIONS = dict(_OPERATORS, **{
    "neg": _negate, "negative": _negate, "logical_not": _not, "bitwise_not": _not,
    "bitwise_and": _logical("&"), "bitwise_or": _logical("|"),
    "rsub": lambda a, b: _OPERATORS["sub"](b, a),  # torch.rsub(a, b) is b - a
    "abs": _function("abs"), "exp": _function("exp", "float"), "log": _function("log", "float"),
    "sqrt": _function("sqrt", "float"), "tanh": _function("tanh", "float"),
    "sigmoid": _function("sigmoid", "float"), "floor": _function("floor", "int"),
    "where": _where, "minimum": _two("min"), "maximum": _two("max"), "min": _two("min"),
    "max": _two("max"), "clamp": _clamp, "clip": _clamp, "pow": _power,
    "new_ones": _new_constant(1), "new_zeros": _new_constant(0), "ones_like": _constant_like(1),
    "zeros_like": _constant_like(0), "float": _to_float,
    "full_like": lambda like, fill_value, dtype=None, **ignored: _constant(like, fill_value, dtype),
    "new_full": lambda like, size, fill_value, dtype=None, **ignored: _constant(
        like, fill_value, dtype),
})
for _name in ("neg", "abs", "pow"):
    setattr(Expr, "__%s__" % _name, _FUNCTIONS[_name])
Expr.__invert__ = _not
Expr.__pos__ = lambda x: x


def call(func, args, kwargs):
    """A torch function or tensor method applied to traced values (or a captured tensor read
    at traced indices)."""
    name = getattr(func, "__name__", func).strip("_")
    if name == "getitem":
        return _read(*args)
    handler = _FUNCTIONS.get(name)
    if handler is None:
        raise TraceError("%s is not in attnc's expression language: it has + - * / // %% "
                         "comparisons & | ~, where, minimum, maximum, clamp, abs, floor, exp, "
                         "log, sqrt, tanh, sigmoid and indexing of captured tensors"
                         % _qualified(func))
    return handler(*args, **kwargs)


def _qualified(func):
    name = getattr(func, "__name__", str(func))
    owner = getattr(func, "__objclass__", None)
    return "torch.Tensor.%s" % name if owner is not None else "torch.%s" % name


def coerce(value):
    """VALUE as an Expr: a number as a literal or param, a one-element captured tensor read."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, numbers.Number) and not isinstance(value, complex):
        return _running.captures.number(value)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return _read(value.reshape(1), (0,), original=value)
    raise TraceError("%s used as a value: index a captured tensor at the traced indices, as "
                     "bias[h, q_idx - kv_idx]" % _described(value))


def _described(value):
    if isinstance(value, torch.Tensor):
        return "a captured tensor of shape %s" % list(value.shape)
    return "a %s" % type(value).__name__


def _read(tensor, index, original=None):
    """tensor[index] of a captured tensor: each index clamped into its dimension."""
    if isinstance(tensor, Expr):
        raise TraceError("indexing a traced value (score[...], q_idx[...])")
    index = index if isinstance(index, tuple) else (index,)
    if len(index) != tensor.dim() or any(isinstance(i, (slice, type(Ellipsis))) for i in index):
        raise TraceError("a captured tensor of shape %s read as [%s]: attnc reads one element, "
                         "one index per dimension" % (list(tensor.shape), _index_text(index)))
    captures = _running.captures
    name = captures.tensor(tensor, original)
    reads = []
    for position, extent in zip(index, tensor.shape):
        position = coerce(position)
        if position.kind != "int":
            raise TraceError("a %s index into a captured tensor" % position.kind)
        reads.append(_index(position.text, captures.dimension(extent)))
    text = "%s[%s]" % (name, ", ".join(reads))
    if tensor.dtype is torch.bool:
        return Expr("(%s != 0)" % text, "bool")
    return Expr(text, "float" if tensor.is_floating_point() else "int")


def _index(position, extent):
    """An index into a dimension of EXTENT: from the end when negative, as torch reads it
    (the indices themselves are never negative), then clamped into the dimension."""
    if position not in ("b", "h", "q_idx", "kv_idx"):
        position = "where(%s < 0, %s + %s, %s)" % (position, position, extent, position)
    return "clamp(%s, 0, %s - 1)" % (position, extent)


def _index_text(index):
    return ", ".join(":" if isinstance(i, slice) else "..." if i is Ellipsis else
                     getattr(i, "text", str(i)) for i in index)


class _Running(threading.local):
    captures = None  # the Captures of this thread's trace


_running = _Running()


_INDICES = (Expr("b", "int"), Expr("h", "int"), Expr("q_idx", "int"), Expr("kv_idx", "int"))


def trace(score_mod, mask_mod, sizes):
    """(score_mod's text or None, mask_mod's text or None, their Captures). SIZES: {"Tq": ...,
    "Tk": ...}, the dimensions captured tensors may share with the call."""
    captures = Captures([f for f in (score_mod, mask_mod) if f is not None], sizes)
    _running.captures = captures
    try:
        score = None if score_mod is None else _score_text(score_mod(Expr("score", "float"),
                                                                     *_INDICES))
        mask = None if mask_mod is None else _mask_text(mask_mod(*_INDICES))
    finally:
        _running.captures = None
    captures.keep_only_read((score or "") + " " + (mask or ""))
    return score, mask, captures


def _score_text(result):
    result = _result(result, "score_mod")
    if result.kind == "bool":
        raise TraceError("score_mod returned a bool; it returns the new score")
    return _to_float(result).text


def _mask_text(result):
    if result is True:
        return None
    result = _result(result, "mask_mod")
    if result.kind != "bool":
        raise TraceError("mask_mod returned %s, not a bool" % result.kind)
    return result.text


def _result(result, what):
    if isinstance(result, (Expr, numbers.Real)):
        return coerce(result)
    raise TraceError("%s returned %s, not a traced value" % (what, _described(result)))
