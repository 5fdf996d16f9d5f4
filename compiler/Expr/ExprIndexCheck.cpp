#include "Expr/ExprIndexCheck.h"

#include "Expr/ExprBounds.h"
#include "Expr/ExprPrint.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

namespace attnc::expr {
namespace {

// Exact integers: the proof's values are 32-bit ints and sizes, their products and sums, so 128
// bits hold them; a step that would pass the end all the same is caught and proves nothing.
using Wide = __int128;

constexpr Wide kIntMin = std::numeric_limits<int32_t>::min();
constexpr Wide kIntMax = std::numeric_limits<int32_t>::max();
// B, Tq and Tk are kernel ints too: each lies in [1, kMaxSize].
constexpr int64_t kMaxSize = std::numeric_limits<int32_t>::max();

// At most this many bounds are kept per side: min and max of nested clamps would otherwise
// multiply them.
constexpr size_t kMaxBounds = 6;

// Wide arithmetic that notes an overflow instead of wrapping, so that a formula reads as the
// math and its caller checks once.
class Exact {
public:
  Wide add(Wide a, Wide b) {
    Wide r;
    overflow_ = __builtin_add_overflow(a, b, &r) || overflow_;
    return r;
  }
  Wide multiply(Wide a, Wide b) {
    Wide r;
    overflow_ = __builtin_mul_overflow(a, b, &r) || overflow_;
    return r;
  }
  bool overflowed() const { return overflow_; }

private:
  bool overflow_ = false;
};

// (terms[0] + terms[1] B + terms[2] Tq + terms[3] Tk) / denominator with denominator > 0: an
// affine function of the sizes with rational coefficients, as x // m's bounds are x's over m.
struct Bound {
  std::array<Wide, 4> terms{};
  Wide denominator = 1;
  friend bool operator==(const Bound&, const Bound&) = default;
};

Bound constant(Wide c) { return {{c, 0, 0, 0}, 1}; }
Bound affine(const Affine& a) { return {{a.constant, a.batch, a.seqQ, a.seqK}, 1}; }

unsigned __int128 magnitude(Wide v) {
  return v < 0 ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
}

// b over the greatest common divisor of its numbers, which keeps them small; none after an
// overflow.
std::optional<Bound> reduced(Bound b, const Exact& exact) {
  if (exact.overflowed())
    return std::nullopt;
  unsigned __int128 divisor = magnitude(b.denominator);
  for (Wide t : b.terms)
    for (unsigned __int128 x = magnitude(t); x != 0;)
      divisor = std::exchange(x, divisor % x);
  for (Wide& t : b.terms)
    t /= static_cast<Wide>(divisor);
  b.denominator /= static_cast<Wide>(divisor);
  return b;
}

std::optional<Bound> sum(const Bound& x, const Bound& y) {
  Exact e;
  Bound r;
  for (size_t i = 0; i < r.terms.size(); ++i)
    r.terms[i] = e.add(e.multiply(x.terms[i], y.denominator),
                       e.multiply(y.terms[i], x.denominator));
  r.denominator = e.multiply(x.denominator, y.denominator);
  return reduced(r, e);
}

std::optional<Bound> scaled(const Bound& x, Wide k) {
  Exact e;
  Bound r = x;
  for (Wide& t : r.terms)
    t = e.multiply(t, k);
  return reduced(r, e);
}

std::optional<Bound> difference(const Bound& x, const Bound& y) {
  const auto minusY = scaled(y, -1);
  return minusY ? sum(x, *minusY) : std::nullopt;
}

// x / m for m > 0.
std::optional<Bound> divided(const Bound& x, Wide m) {
  Exact e;
  Bound r = x;
  r.denominator = e.multiply(x.denominator, m);
  return reduced(r, e);
}

// The least value of x over the box of sizes [1, kMaxSize]^3, each size at the end that lowers
// it, times x's denominator (so its sign is x's).
std::optional<Wide> leastNumerator(const Bound& x) {
  Exact e;
  Wide least = x.terms[0];
  for (size_t i = 1; i < x.terms.size(); ++i)
    least = e.add(least, x.terms[i] < 0 ? e.multiply(x.terms[i], kMaxSize) : x.terms[i]);
  return e.overflowed() ? std::nullopt : std::optional(least);
}

// x >= 0 at every size in the box.
bool nonNegative(const std::optional<Bound>& x) {
  const auto least = x ? leastNumerator(*x) : std::nullopt;
  return least && *least >= 0;
}

// The least int at or above x's least value over the box: the least an int that x bounds from
// below can be.
std::optional<Wide> leastInt(const Bound& x) {
  const auto least = leastNumerator(x);
  if (!least)
    return std::nullopt;
  // C++ division truncates towards zero: the ceiling already for a negative quotient.
  return *least / x.denominator + (*least % x.denominator > 0 ? 1 : 0);
}

// The greatest int an int that x bounds from above can be.
std::optional<Wide> greatestInt(const Bound& x) {
  const auto minusX = scaled(x, -1);
  const auto least = minusX ? leastInt(*minusX) : std::nullopt;
  return least ? std::optional<Wide>(-*least) : std::nullopt;
}

// The atoms of an int's exact linear form: the constant 1, the variables (qpos written through
// q_idx, Tq and Tk) and the sizes.
enum Atom { kOne, kBatchEntry, kHead, kKvHead, kQueryRow, kKey, kSeqQ, kSeqK, kAtoms };

// sum over atoms a of coefficients[a] * a: an int built by +, -, negation and products with
// constants, so that kv_idx - kv_idx is 0. It is the value modulo 2^32 and 2^64 (where kernels
// and the reference wrap), so the value itself where its bounds fit 32 bits.
struct Linear {
  std::array<Wide, kAtoms> coefficients{};
};

Linear atom(Atom a) {
  Linear x;
  x.coefficients[a] = 1;
  return x;
}

std::optional<Linear> combined(const Linear& x, const Linear& y, Wide factorOfY) {
  Exact e;
  Linear r;
  for (size_t a = 0; a < kAtoms; ++a)
    r.coefficients[a] = e.add(x.coefficients[a], e.multiply(y.coefficients[a], factorOfY));
  return e.overflowed() ? std::nullopt : std::optional(r);
}

std::optional<Linear> scaled(const Linear& x, Wide k) { return combined(Linear(), x, k); }

// Sound lower and upper bounds of an int node's value (an empty side is unbounded), and its
// exact linear form where it has one.
struct Range {
  std::optional<Linear> exact;
  std::vector<Bound> lower, upper;
};

void keep(std::vector<Bound>& bounds, const std::optional<Bound>& b) {
  if (b && bounds.size() < kMaxBounds &&
      std::find(bounds.begin(), bounds.end(), *b) == bounds.end())
    bounds.push_back(*b);
}

// The integers a range allows over the box: its tightest bounds' extremes, where it has them.
struct Interval {
  std::optional<Wide> lo, hi;
};

Interval interval(const Range& r) {
  Interval i;
  for (const Bound& l : r.lower)
    if (const auto v = leastInt(l); v && (!i.lo || *v > *i.lo))
      i.lo = v;
  for (const Bound& u : r.upper)
    if (const auto v = greatestInt(u); v && (!i.hi || *v < *i.hi))
      i.hi = v;
  return i;
}

// Whether the value provably stays within 32 bits, where kernels and the reference agree.
bool fitsInt32(const Range& r) {
  const Interval i = interval(r);
  return i.lo && i.hi && *i.lo >= kIntMin && *i.hi <= kIntMax;
}

// The int operations that wrap in kernels when their value leaves 32 bits (abs(-2^31) is -2^31,
// x // -1 is -x); min, max, clamp, where and % only pick or shrink their operands' values.
bool mayWrap(Op op) {
  return op == Op::Neg || op == Op::Add || op == Op::Sub || op == Op::Mul || op == Op::Abs ||
         op == Op::FloorDiv;
}

Range negated(const Range& r) {
  Range n;
  if (r.exact)
    n.exact = scaled(*r.exact, -1);
  for (const Bound& u : r.upper)
    keep(n.lower, scaled(u, -1));
  for (const Bound& l : r.lower)
    keep(n.upper, scaled(l, -1));
  return n;
}

// A bound on both sides' extreme: for max's upper bound, of an upper bound of each side the
// one that is provably the larger; for min's lower bound, the provably smaller.
std::vector<Bound> dominating(const std::vector<Bound>& a, const std::vector<Bound>& b,
                              bool larger) {
  std::vector<Bound> result;
  for (const Bound& x : a)
    for (const Bound& y : b) {
      if (nonNegative(larger ? difference(x, y) : difference(y, x)))
        keep(result, x);
      else if (nonNegative(larger ? difference(y, x) : difference(x, y)))
        keep(result, y);
    }
  return result;
}

std::vector<Bound> either(std::vector<Bound> a, const std::vector<Bound>& b) {
  for (const Bound& y : b)
    keep(a, y);
  return a;
}

Range minimum(const Range& a, const Range& b) {
  return {std::nullopt, dominating(a.lower, b.lower, false), either(a.upper, b.upper)};
}

Range maximum(const Range& a, const Range& b) {
  return {std::nullopt, either(a.lower, b.lower), dominating(a.upper, b.upper, true)};
}

class IndexChecker {
public:
  IndexChecker(std::string_view key, std::string_view text, const IndexFacts& facts)
      : key_(key), text_(text), facts_(facts) {
    const Bound zero = constant(0);
    ends_[kOne] = {constant(1), constant(1)};
    ends_[kBatchEntry] = {zero, {{-1, 1, 0, 0}, 1}};
    ends_[kHead] = {zero, constant(facts.heads - 1)};
    ends_[kKvHead] = {zero, constant(facts.kvHeads - 1)};
    ends_[kQueryRow] = {zero, {{-1, 0, 1, 0}, 1}};
    ends_[kKey] = {zero, {{-1, 0, 0, 1}, 1}};
    ends_[kSeqQ] = {{{0, 0, 1, 0}, 1}, {{0, 0, 1, 0}, 1}};
    ends_[kSeqK] = {{{0, 0, 0, 1}, 1}, {{0, 0, 0, 1}, 1}};
    // The same box for the interval arithmetic of ExprBounds.h: the constant bounds it adds.
    const int64_t n = kMaxSize;
    box_.variables = {{"b", Bounds::ofInt(0, n - 1)},
                      {"h", Bounds::ofInt(0, facts.heads - 1)},
                      {"g", Bounds::ofInt(0, facts.kvHeads - 1)},
                      {"q_idx", Bounds::ofInt(0, n - 1)},
                      {"kv_idx", Bounds::ofInt(0, n - 1)},
                      {"qpos", facts.bottomRight ? Bounds::ofInt(1 - n, n - 1)
                                                 : Bounds::ofInt(0, n - 1)},
                      {"Tq", Bounds::ofInt(1, n)},
                      {"Tk", Bounds::ofInt(1, n)}};
    for (const auto& [name, value] : facts.params)
      box_.params[name] = value.type == Type::Float ? Bounds::ofFloat(value.f, value.f)
                                                    : Bounds::ofInt(value.i, value.i);
  }

  // Checks every aux read under `node`, then returns the node's range (ints only; a float or
  // bool has none).
  Range range(const Node& n) {
    Range r = n.op == Op::Aux ? checkRead(n) : symbolic(n);
    if (n.type != Type::Int)
      return {};
    // Interval arithmetic bounds what the symbolic rules miss (floor(sigmoid(x) * 8) is within
    // [0, 8]); it gives an int no finite bound where it may leave 32 bits, so a finite one also
    // shows that the step cannot wrap. Where neither it nor the bounds show that, the bounds
    // hold for neither kernels nor the reference. The exact form stays: kernels compute +, - and
    // * modulo 2^32 and the reference modulo 2^64, so the value is the form's modulo both, and
    // is the form once its bounds fit 32 bits again (kv_idx + 2 - 2 at Tk = 2^31 - 1).
    const Bounds b = bounds(n, box_);
    const bool fitsByInterval = std::isfinite(b.lo) && std::isfinite(b.hi);
    if (mayWrap(n.op) && !fitsByInterval && !fitsInt32(r))
      r.lower.clear(), r.upper.clear();
    if (std::isfinite(b.lo))
      keep(r.lower, constant(static_cast<Wide>(b.lo)));
    if (std::isfinite(b.hi))
      keep(r.upper, constant(static_cast<Wide>(b.hi)));
    return r;
  }

private:
  Range symbolic(const Node& n) {
    auto arg = [&](size_t i) { return range(n.args[i]); };
    if (n.type != Type::Int) {
      for (size_t i = 0; i < n.args.size(); ++i)
        (void)arg(i);
      return {};
    }
    switch (n.op) {
    case Op::IntLiteral:
      return exactly(scaled(atom(kOne), n.intValue));
    case Op::Param:
      return exactly(scaled(atom(kOne), facts_.params.at(n.name).i));
    case Op::Variable:
      return exactly(variable(n.name));
    case Op::Neg:
      return negated(arg(0));
    case Op::Add:
      return sum(arg(0), arg(1));
    case Op::Sub:
      return sum(arg(0), negated(arg(1)));
    case Op::Mul: {
      const Range a = arg(0), b = arg(1);
      if (const auto k = constantOf(b))
        return scaledRange(a, *k);
      if (const auto k = constantOf(a))
        return scaledRange(b, *k);
      return {};
    }
    case Op::Min:
      return minimum(arg(0), arg(1));
    case Op::Max:
      return maximum(arg(0), arg(1));
    case Op::Clamp:
      return minimum(maximum(arg(0), arg(1)), arg(2));
    case Op::Where: {
      (void)arg(0);
      const Range a = arg(1), b = arg(2);
      return {std::nullopt, dominating(a.lower, b.lower, false),
              dominating(a.upper, b.upper, true)};
    }
    case Op::Abs:
      return absolute(arg(0));
    case Op::Mod: {
      // Floor modulo by m has m's sign and is smaller in size; x % 0 is 0.
      (void)arg(0);
      const auto m = constantOf(arg(1));
      if (!m)
        return {};
      return {std::nullopt, {constant(std::min<Wide>(*m + 1, 0))},
              {constant(std::max<Wide>(*m - 1, 0))}};
    }
    case Op::FloorDiv:
      return quotient(arg(0), constantOf(arg(1)));
    default: // aux reads' values, floor, philox: the constant bounds decide
      for (size_t i = 0; i < n.args.size(); ++i)
        (void)arg(i);
      return {};
    }
  }

  Linear variable(const std::string& name) const {
    if (name == "b")
      return atom(kBatchEntry);
    if (name == "h")
      return atom(kHead);
    if (name == "g")
      return atom(kKvHead);
    if (name == "q_idx")
      return atom(kQueryRow);
    if (name == "kv_idx")
      return atom(kKey);
    if (name == "Tq")
      return atom(kSeqQ);
    if (name == "Tk")
      return atom(kSeqK);
    // qpos = q_idx + Tk - Tq bottom-right, q_idx top-left.
    Linear qpos = atom(kQueryRow);
    if (facts_.bottomRight)
      qpos.coefficients[kSeqK] = 1, qpos.coefficients[kSeqQ] = -1;
    return qpos;
  }

  // The value's linear form and the bounds it gives: each atom at the end of its range that
  // lowers (raises) the sum.
  Range exactly(const std::optional<Linear>& x) const {
    if (!x)
      return {};
    Range r{x, {}, {}};
    keep(r.lower, extreme(*x, false));
    keep(r.upper, extreme(*x, true));
    return r;
  }

  std::optional<Bound> extreme(const Linear& x, bool upper) const {
    Exact e;
    Bound r;
    for (size_t a = 0; a < kAtoms; ++a) {
      const Wide c = x.coefficients[a];
      const Bound& end = (c >= 0) == upper ? ends_[a].second : ends_[a].first;
      for (size_t t = 0; t < r.terms.size(); ++t)
        r.terms[t] = e.add(r.terms[t], e.multiply(c, end.terms[t]));
    }
    return reduced(r, e);
  }

  Range sum(const Range& a, const Range& b) const {
    Range r = a.exact && b.exact ? exactly(combined(*a.exact, *b.exact, 1)) : Range();
    for (const Bound& x : a.lower)
      for (const Bound& y : b.lower)
        keep(r.lower, expr::sum(x, y));
    for (const Bound& x : a.upper)
      for (const Bound& y : b.upper)
        keep(r.upper, expr::sum(x, y));
    return r;
  }

  Range scaledRange(const Range& r, Wide k) const {
    Range s = r.exact ? exactly(scaled(*r.exact, k)) : Range();
    const Range& source = k >= 0 ? r : negated(r);
    for (const Bound& l : source.lower)
      keep(s.lower, scaled(l, k >= 0 ? k : -k));
    for (const Bound& u : source.upper)
      keep(s.upper, scaled(u, k >= 0 ? k : -k));
    return s;
  }

  // |x| >= 0, and below the larger of x's upper bound and minus its lower bound: provably the
  // larger affine one, or the larger at the box's extremes.
  static Range absolute(const Range& a) {
    Range r;
    keep(r.lower, constant(0));
    r.upper = dominating(a.upper, negated(a).upper, true);
    if (const Interval i = interval(a); i.lo && i.hi)
      keep(r.upper, constant(std::max(*i.hi, -*i.lo)));
    return r;
  }

  // x // m for a constant m: 0 for m = 0; else with y = x / m, y - (|m| - 1) / |m| <= x // m <= y
  // (the bounds of x swapping sides for m < 0), and x // m >= 0 whenever x / m >= 0.
  static Range quotient(const Range& a, std::optional<Wide> m) {
    if (!m)
      return {};
    if (*m == 0)
      return {Linear(), {constant(0)}, {constant(0)}};
    const Range divided = *m > 0 ? a : negated(a);
    const Wide k = *m > 0 ? *m : -*m;
    Range r;
    for (const Bound& l : divided.lower) {
      if (nonNegative(l))
        keep(r.lower, constant(0));
      const auto shifted = expr::sum(l, constant(1 - k));
      keep(r.lower, shifted ? expr::divided(*shifted, k) : std::nullopt);
    }
    for (const Bound& u : divided.upper)
      keep(r.upper, expr::divided(u, k));
    return r;
  }

  // The value, where it is one int for every size and point: an exact form that is a constant
  // within 32 bits (past them, the value is only congruent to it), or equal constant bounds.
  static std::optional<Wide> constantOf(const Range& r) {
    if (r.exact) {
      const auto& c = r.exact->coefficients;
      if (std::all_of(c.begin() + 1, c.end(), [](Wide x) { return x == 0; }) &&
          c[kOne] >= kIntMin && c[kOne] <= kIntMax)
        return c[kOne];
    }
    auto isConstant = [](const Bound& b) {
      return b.denominator == 1 && b.terms[1] == 0 && b.terms[2] == 0 && b.terms[3] == 0;
    };
    for (const Bound& l : r.lower)
      for (const Bound& u : r.upper)
        if (isConstant(l) && l == u)
          return l.terms[0];
    return std::nullopt;
  }

  // An aux read's value is unknown; its indices must be in bounds.
  Range checkRead(const Node& read) {
    const std::vector<Affine>& shape = facts_.auxShapes.at(read.name);
    for (size_t d = 0; d < read.args.size(); ++d) {
      const Node& index = read.args[d];
      const Range r = range(index);
      const Bound dimension = affine(shape[d]);
      const auto last = expr::sum(dimension, constant(-1));
      bool low = false, high = false;
      for (const Bound& l : r.lower) {
        const auto least = leastInt(l); // the index is an int: above -1/2 is at least 0
        low = low || (least && *least >= 0);
      }
      for (const Bound& u : r.upper)
        high = high || (last && nonNegative(difference(*last, u)));
      if (low && high)
        continue;
      const std::string dim = dimText(shape[d]);
      throw ExprError(std::string(key_) + "=\"" + std::string(text_) + "\": column " +
                      std::to_string(index.column) + ": index " + std::to_string(d + 1) + " of " +
                      read.name + " (" + print(index) + ") is not provably " +
                      (low ? "below " + dim : high ? "at least 0" : "within [0, " + dim + ")") +
                      " for every B, Tq and Tk; write clamp(" + print(index) + ", 0, " + dim +
                      " - 1)");
    }
    return {};
  }

  static std::string dimText(const Affine& a) {
    if (a.batch == 1)
      return "B";
    if (a.seqQ == 1)
      return "Tq";
    if (a.seqK == 1)
      return "Tk";
    return std::to_string(a.constant);
  }

  std::string_view key_, text_;
  const IndexFacts& facts_;
  std::array<std::pair<Bound, Bound>, kAtoms> ends_; // each atom's least and greatest value
  Box box_;
};

} // namespace

void checkAuxIndices(std::string_view key, std::string_view text, const Node& root,
                     const IndexFacts& facts) {
  IndexChecker(key, text, facts).range(root);
}

} // namespace attnc::expr
