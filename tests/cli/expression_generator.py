"""A seeded generator of well-typed attention specs with random score_mod and mask_mod
expressions (docs/spec.md, Expressions), for the differential test (test_expressions.py).

Every expression it writes is one the f64 reference and an f32 kernel must agree on within
verify's tolerance, so a disagreement is a code generator's bug, not rounding:
- masks, and the conditions inside score_mods, compare only values that f32 and f64 compute
  exactly (ints, aux reads, params, ints times or plus exact binary fractions, and the special
  values below), so no comparison can flip by rounding;
- floor and % see only ints and exact values, for the same reason; a floor past 32 bits
  (saturated in kernels, exact in the reference's 64-bit ints) is only compared with small ints;
- score_mods stay within a few tens (softmax turns a score's relative rounding error into an
  absolute one), except for the special values: NaN, ±inf and 0 made exactly alike in f32 and
  f64 (log and sqrt of ints at most 0, exp of thousands, division by 0, products past f32's
  range), and ±inf and NaN read from aux tensors (Case.special_aux);
- ints stay far inside 32 bits (the language leaves overflow unspecified): a philox() draw,
  which takes any 32-bit value, is only ever taken % a small number; the limits 2147483647 and
  -2147483647 - 1 are only compared;
- every aux index is provably in bounds (clamp, % by the extent, or the variable that ranges
  over the dimension), as the spec requires.

A few specs carry one literal that no kernel type holds (an int past 32 bits, a float past
f32's normal range); Case.refused_literal names it, and every backend must refuse the spec for
it.
"""
import collections
import random

# Binary fractions: exact in f32 and f64, so products and sums with small ints are exact too.
EXACT_FLOATS = ["0.5", "0.25", "1.5", "2.0", "0.75", "3.5"]

# Literals that kernels cannot hold: ints past 32 bits, floats past f32's normal numbers.
WIDE_INTS = ["2147483648", "4294967296", "9007199254740993", "9223372036854775808"]
WIDE_FLOATS = ["3.5e38", "1e39", "1e300", "1e-39", "1e-50"]

# The aux tensors a spec may declare: name, element type, dimensions.
AUX_TENSORS = [
    ("kv_tag", "i32", ["B", "Tk"]),
    ("q_tag", "i32", ["B", "Tq"]),
    ("head_table", "f32", ["heads", "9"]),
    ("key_gate", "f32", ["Tk"]),
    ("grid", "i32", ["kv_heads", "5", "7"]),
]

# Base specs the expressions join: variants, GQA, dtypes, alignments and built-in masks.
BASES = [
    "heads=2 d_k=16",
    "heads=4 kv_heads=2 d_k=16 lse=true",
    "heads=3 kv_heads=1 d_k=8 causal_align=top_left",
    "heads=2 d_k=16 mask=causal lse=true",
    "heads=2 d_k=16 mask=padding weights=true",
    "heads=2 d_k=16 mask=window window_left=9 window_right=4",
    "heads=2 d_k=32 dtype=f16 lse=true",
    "heads=2 kv_heads=1 d_k=16 alibi=true softcap=15",
    "variant=additive heads=2 d_k=8",
    "variant=bilinear heads=2 d_q=6 d_k=10 mask=causal",
    "variant=mha heads=2 kv_heads=1 d_k=8 pe=sinusoidal",
]


# A generated spec: its text, its head counts (aux shapes use them), the f32 aux tensors whose
# elements the test mixes with NaN and ±inf, and the literal it must be refused for (or None).
Case = collections.namedtuple("Case", "spec heads kv_heads special_aux refused_literal")


class ExpressionGenerator:
    def __init__(self, seed):
        self.random = random.Random(seed)

    def case(self):
        spec = self.spec()
        # The f32 aux tensors read with NaN and ±inf among their elements: in a third of the
        # specs that read one.
        floats = [name for name, kind, _ in AUX_TENSORS if kind == "f32" and name in self.aux_used]
        special = floats if self.random.random() < 0.35 else []
        return Case(spec, self.heads, self.kv_heads, special, self.refused_literal)

    def spec(self):
        """One spec text: a base, a score_mod and/or a mask_mod, and the params and aux
        tensors they read."""
        base = self.random.choice(BASES)
        self.heads = int(base.split("heads=")[1].split()[0])
        kv = base.split("kv_heads=")
        self.kv_heads = int(kv[1].split()[0]) if len(kv) > 1 else self.heads
        self.params = {}  # name -> literal text
        self.aux_used = []
        self.draws = False  # a philox() call, which needs seed
        self.refused_literal = None  # the literal past every kernel type, if the spec has one
        parts = [base]
        which = self.random.choice(["score", "mask", "both", "both"])
        if which in ("score", "both"):
            parts.append('score_mod="%s"' % self.score(3))
        if which in ("mask", "both"):
            parts.append('mask_mod="%s"' % self.boolean(3))
        if self.params:
            parts.append('params="%s"' % " ".join(
                "%s=%s" % (name, value) for name, value in sorted(self.params.items())))
        if self.draws:
            parts.append("seed=%d" % self.random.randint(0, 2**64 - 1))
        if self.aux_used:
            parts.append('aux="%s"' % " ".join(
                "%s:%s[%s]" % (name, kind, ",".join(dims))
                for name, kind, dims in AUX_TENSORS if name in self.aux_used))
        return " ".join(parts)

    # --- ints ---------------------------------------------------------------------------

    def integer(self, depth):
        """An int expression whose magnitude stays below a few thousand for the test shapes."""
        r = self.random
        if depth <= 0 or r.random() < 0.3:
            return self.int_leaf()
        choice = r.randrange(10)
        a = self.integer(depth - 1)
        if choice == 0:
            return "%s + %s" % (a, self.integer(depth - 1))
        if choice == 1:
            return "%s - %s" % (a, self.wrapped(self.integer(depth - 1)))
        if choice == 2:
            return "%s * %d" % (self.wrapped(a), r.randint(-3, 3))
        if choice == 3 and r.random() < 0.5:
            return "%s %% %d" % (self.wrapped(a), r.choice([-16, -3, -1, 0, 2, 3, 4, 7, 16]))
        if choice == 3:
            # Floor modulo and division of operands of either sign, by an expression (0 too).
            return "(%s - %s) %s %s" % (a, self.wrapped(self.integer(depth - 1)),
                                        r.choice(["%", "//"]), self.wrapped(self.int_leaf()))
        if choice == 4:
            return "%s(%s, %s)" % (r.choice(["min", "max"]), a, self.integer(depth - 1))
        if choice == 5:
            return "abs(%s)" % a
        if choice == 6:
            return "clamp(%s, %d, %d)" % (a, r.randint(-20, 0), r.randint(1, 40))
        if choice == 7 and r.random() < 0.5:
            return "floor(%s / %d)" % (self.wrapped(a), r.choice([2, 3, 5, 16, 64]))
        if choice == 7:
            return "%s // %d" % (self.wrapped(a), r.choice([-3, 0, 2, 3, 5, 16, 64]))
        if choice == 8:
            return "where(%s, %s, %s)" % (self.boolean(depth - 1), a, self.integer(depth - 1))
        if r.random() < 0.6:
            self.draws = True
            counter = [a] + [self.integer(depth - 1) for _ in range(3)]
            return "philox(%s, %s) %% %d" % (", ".join(counter), self.int_leaf(),
                                             r.choice([2, 3, 4, 7, 16]))
        return "-%s" % self.wrapped(a)

    def int_leaf(self):
        r = self.random
        choice = r.randrange(8)
        if choice <= 3:
            return r.choice(["q_idx", "kv_idx", "qpos", "kv_idx", "q_idx", "b", "h", "g", "Tq",
                             "Tk"])
        if choice == 4:
            return self.int_literal()
        if choice == 5:
            name = r.choice(["n", "m"])
            self.params.setdefault(name, str(r.randint(-4, 12)))
            return name
        return self.aux_read("i32")

    def refused(self, wide):
        """Rarely (3%, once per spec) one of the literals `wide`, past every kernel type, which
        the spec must be refused for; else None."""
        if self.refused_literal is not None or self.random.random() >= 0.03:
            return None
        self.refused_literal = self.random.choice(wide)
        return self.refused_literal

    def int_literal(self):
        """A small int, negative ones included; rarely one past 32 bits."""
        return self.refused(WIDE_INTS) or str(self.random.randint(-9, 9))

    # --- exact floats (comparisons and floor see only these) ---------------------------

    def exact_float(self):
        r = self.random
        choice = r.randrange(6)
        if choice == 5:
            return self.special()
        if choice == 0:
            return self.aux_read("f32")
        if choice == 1:
            self.params.setdefault("gain", r.choice(EXACT_FLOATS))
            return "gain"
        if choice == 2:
            return "%s * %s" % (self.wrapped(self.int_leaf()), r.choice(EXACT_FLOATS))
        if choice == 3:
            return "%s + %s" % (self.int_leaf(), r.choice(EXACT_FLOATS))
        return self.float_literal()

    def float_literal(self):
        """An exact binary fraction; rarely one past f32's normal numbers, or one at their edge,
        which the spec must not be refused for."""
        r = self.random
        wide = self.refused(WIDE_FLOATS)
        if wide:
            return wide
        if r.random() < 0.03:
            return r.choice(["3.4028235e38", "1.1754944e-38"])
        return r.choice(EXACT_FLOATS)

    def special(self):
        """NaN, ±inf or 0 made alike in f32 and f64 (or an exact small value for some ints)."""
        r = self.random
        form = r.choice([
            "log(min(%s, 0))",  # -inf at 0, NaN below
            "sqrt(min(%s, 0))",  # 0 at 0, NaN below
            "exp(%s * 1000)",  # 0, 1 or inf
            "%s / 0",  # ±inf, or NaN at 0
            "1e30 * 1e30 * %s",  # past f32's range mid-expression: ±inf, or NaN at 0
        ])
        if r.random() < 0.15:
            return "-exp(1000.0)"
        return form % self.wrapped(self.int_leaf())

    # --- bools ---------------------------------------------------------------------------

    def boolean(self, depth):
        r = self.random
        if depth <= 0 or r.random() < 0.25:
            return self.comparison(max(depth - 1, 0))
        choice = r.randrange(6)
        if choice <= 1:
            op = "&&" if choice == 0 else "||"
            return "%s %s %s" % (self.wrapped(self.boolean(depth - 1)), op,
                                 self.wrapped(self.boolean(depth - 1)))
        if choice == 2:
            return "!%s" % self.wrapped(self.boolean(depth - 1))
        if choice == 3:
            return "bit(%s, %s)" % (self.integer(depth - 1), self.integer(depth - 1))
        if choice == 4:
            return "where(%s, %s, %s)" % (self.boolean(depth - 1), self.boolean(depth - 1),
                                          self.boolean(depth - 1))
        return self.comparison(depth - 1)

    def comparison(self, depth):
        r = self.random
        op = r.choice(["<", "<=", ">", ">=", "==", "!="])
        choice = r.random()
        if choice < 0.25:
            return "%s %s %s" % (self.exact_float(), op, self.exact_float())
        if choice < 0.35:
            # floor saturates past the int range, and of NaN is 0; small ints compare alike
            # with the kernels' 32-bit saturation and the reference's 64-bit value.
            big = r.choice([lambda: "%s * 1e9" % self.wrapped(self.int_leaf()), self.special,
                            lambda: self.aux_read("f32")])()
            return "floor(%s) %s %s" % (big, op, self.wrapped(self.integer(depth)))
        if choice < 0.4:
            return "%s %s %s" % (self.integer(depth), op,
                                 r.choice(["2147483647", "(-2147483647 - 1)"]))
        return "%s %s %s" % (self.integer(depth), op, self.wrapped(self.integer(depth)))

    # --- score_mods ----------------------------------------------------------------------

    def score(self, depth):
        """A float expression of about unit size; at its root it reads score, so the
        softmax sees the kernel's own scores transformed."""
        r = self.random
        shape = r.randrange(6)
        if shape == 4:  # an int score, negative ones included
            return "clamp(%s, -20, 20)" % self.integer(depth - 1)
        if shape == 5:
            return "where(%s, score, clamp(%s, -20, 20))" % (self.boolean(depth - 1),
                                                            self.integer(depth - 1))
        term = self.bounded(depth - 1)
        if shape == 0:
            return "score + %s" % term
        if shape == 1:
            return "score * %s + %s" % (self.wrapped(self.factor()), term)
        if shape == 2:
            return "where(%s, score, %s)" % (self.boolean(depth - 1), term)
        return "%s(score, %s)" % (r.choice(["min", "max"]), term)

    def factor(self):
        """A multiplier of the score within [-2, 2]."""
        r = self.random
        choice = r.randrange(4)
        if choice == 0:
            return r.choice(EXACT_FLOATS[:3])
        return ["tanh(%s)", "sigmoid(%s) * 2", "clamp(%s, -2, 2)"][choice - 1] % self.bounded(1)

    def bounded(self, depth):
        """A float within about [-8, 8]."""
        r = self.random
        if depth <= 0 or r.random() < 0.2:
            return self.float_leaf()
        choice = r.randrange(11)
        a = self.bounded(depth - 1)
        if choice == 0:
            return "%s + %s" % (a, self.bounded(depth - 1))
        if choice == 1:
            return "%s - %s" % (a, self.wrapped(self.bounded(depth - 1)))
        if choice == 2:
            return "%s * %s" % (self.wrapped(a), self.wrapped(self.factor()))
        if choice == 3:
            return "tanh(%s)" % a
        if choice == 4:
            return "sigmoid(%s)" % a
        if choice == 5:
            return "exp(clamp(%s, -4, 2))" % a
        if choice == 6:
            return "log(abs(%s) + 1)" % a
        if choice == 7:
            return "sqrt(abs(%s))" % a
        if choice == 8:
            return "where(%s, %s, %s)" % (self.boolean(depth - 1), a, self.bounded(depth - 1))
        if choice == 9:
            return "%s / %s" % (self.wrapped(a), r.choice(["2", "-4", "0.5", "3"]))
        return "%s(%s, %s)" % (r.choice(["min", "max"]), a, self.bounded(depth - 1))

    def float_leaf(self):
        r = self.random
        choice = r.randrange(7)
        if choice == 6:
            return self.special()
        if choice == 0:
            return "tanh(score)"
        if choice == 1:
            return "clamp(%s, -8, 8) * 0.25" % self.integer(1)
        if choice == 2:
            return self.aux_read("f32")
        if choice == 3:
            self.params.setdefault("gain", r.choice(EXACT_FLOATS))
            return "gain"
        if choice == 4:
            return "clamp(%s - kv_idx, -24, 24) * 0.125" % r.choice(["qpos", "q_idx"])
        return self.float_literal() if r.random() < 0.8 else r.choice(["-1", "0"])

    # --- aux reads -----------------------------------------------------------------------

    def aux_read(self, kind):
        name, _, dims = self.random.choice([t for t in AUX_TENSORS if t[1] == kind])
        if name not in self.aux_used:
            self.aux_used.append(name)
        return "%s[%s]" % (name, ", ".join(self.index(d) for d in dims))

    def index(self, dim):
        """An index the spec's check proves within `dim` for every B, Tq and Tk."""
        r = self.random
        leaf = lambda: r.choice(["q_idx", "kv_idx", "qpos", "h", "b"])  # noqa: E731
        if dim == "B":
            return "b"
        if dim in ("Tq", "Tk"):
            own = "q_idx" if dim == "Tq" else "kv_idx"
            if r.random() < 0.6:
                return own
            return "clamp(%s %s %d, 0, %s - 1)" % (leaf(), r.choice(["+", "-"]),
                                                  r.randint(0, 9), dim)
        extent = {"heads": self.heads, "kv_heads": self.kv_heads}.get(dim)
        extent = extent if extent is not None else int(dim)
        if dim == "heads" and r.random() < 0.5:
            return "h"
        if dim == "kv_heads" and r.random() < 0.5:
            return "g"
        if r.random() < 0.5:
            return "clamp(%s - %s, 0, %d)" % (leaf(), leaf(), extent - 1)
        return "(%s + %s) %% %d" % (leaf(), r.randint(0, 5), extent)

    @staticmethod
    def wrapped(text):
        """Parenthesised unless it is one token, so precedence never changes its meaning."""
        simple = all(c.isalnum() or c in "_." for c in text)
        return text if simple else "(%s)" % text
