"""A seeded generator of well-typed attention specs with random score_mod and mask_mod
expressions (docs/spec.md, Expressions), for the differential test (test_expressions.py).

Every expression it writes is one the f64 reference and an f32 kernel must agree on within
verify's tolerance, so a disagreement is a code generator's bug, not rounding:
- masks, and the conditions inside score_mods, compare only values that f32 and f64 compute
  exactly (ints, aux reads, params, and ints times or plus exact binary fractions), so no
  comparison can flip by rounding;
- floor and % see only ints and exact values, for the same reason;
- score_mods stay within a few tens (softmax turns a score's relative rounding error into an
  absolute one), and log and sqrt see only non-negative arguments, so no NaN appears;
- ints stay far inside 32 bits (the language leaves overflow unspecified): a philox() draw,
  which takes any 32-bit value, is only ever taken % a small number;
- every aux index is provably in bounds (clamp, % by the extent, or the variable that ranges
  over the dimension), as the spec requires.
"""
import random

# Binary fractions: exact in f32 and f64, so products and sums with small ints are exact too.
EXACT_FLOATS = ["0.5", "0.25", "1.5", "2.0", "0.75", "3.5"]

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
]


class ExpressionGenerator:
    def __init__(self, seed):
        self.random = random.Random(seed)

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
        if choice == 3:
            return "%s %% %d" % (self.wrapped(a), r.choice([-3, 0, 2, 3, 4, 7, 16]))
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
            return str(r.randint(0, 9))
        if choice == 5:
            name = r.choice(["n", "m"])
            self.params.setdefault(name, str(r.randint(-4, 12)))
            return name
        return self.aux_read("i32")

    # --- exact floats (comparisons and floor see only these) ---------------------------

    def exact_float(self):
        r = self.random
        choice = r.randrange(5)
        if choice == 0:
            return self.aux_read("f32")
        if choice == 1:
            self.params.setdefault("gain", r.choice(EXACT_FLOATS))
            return "gain"
        if choice == 2:
            return "%s * %s" % (self.wrapped(self.int_leaf()), r.choice(EXACT_FLOATS))
        if choice == 3:
            return "%s + %s" % (self.int_leaf(), r.choice(EXACT_FLOATS))
        return r.choice(EXACT_FLOATS)

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
        if r.random() < 0.25:
            return "%s %s %s" % (self.exact_float(), op, self.exact_float())
        return "%s %s %s" % (self.integer(depth), op, self.wrapped(self.integer(depth)))

    # --- score_mods ----------------------------------------------------------------------

    def score(self, depth):
        """A float expression of about unit size; at its root it reads score, so the
        softmax sees the kernel's own scores transformed."""
        r = self.random
        shape = r.randrange(4)
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
        choice = r.randrange(6)
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
        return r.choice(EXACT_FLOATS + ["-1", "0"])

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
