#include "Backends/Halide/ExprTileBounds.h"

#include "Backends/Halide/IeeeFloat.h"
#include "Expr/ExprQueries.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <set>
#include <vector>

namespace attnc::halide {
namespace {

using namespace Halide;
using expr::Node;
using expr::Op;

// A number's range, or unknown: every value that is not NaN lies in [lo, hi] (an empty range,
// lo > hi, when there is none), and NaN may occur where `nan` holds. The ends are never NaN, so
// min and max of ends are order-free. A float's ends are f32s, as its values are; an int's are
// int64s holding int32 values (intRange), so that no arithmetic on ends overflows: Halide takes
// int overflow as impossible, and refused to compile `q_idx < 2147483600`, whose bound it moved
// by the tile's offsets ("signed integer overflow occurred during constant-folding").
struct Range {
  bool known = false;
  Expr lo, hi;
  Expr nan = cast<bool>(false);
};

// Which values a bool can take over the tile.
struct Truth {
  Expr canBeTrue, canBeFalse;
};

Range known(Expr lo, Expr hi, Expr nan = cast<bool>(false)) {
  return {true, std::move(lo), std::move(hi), std::move(nan)};
}

// The range of an int op's results whose exact ends are lo and hi (int64): where they leave
// int32, the kernel's op wraps (as the language's +, -, * and negation do), to any int32.
Range intRange(const Expr& lo, const Expr& hi) {
  const Expr wraps = lo < INT32_MIN || hi > INT32_MAX;
  return known(select(wraps, Expr(int64_t{INT32_MIN}), lo),
               select(wraps, Expr(int64_t{INT32_MAX}), hi));
}

// The range of one value: a NaN is no ordered value (an empty range) and the flag.
Range ofValue(const Expr& v) {
  if (!v.type().is_float())
    return known(cast<int64_t>(v), cast<int64_t>(v));
  return known(select(isNaN(v), positiveInf(), v), select(isNaN(v), negativeInf(), v), isNaN(v));
}

// An index's range end (int64) clamped into [0, last], as the kernel's reads clamp: an int32.
Expr clampedIndex(const Expr& end, const Expr& last) {
  return cast<int32_t>(clamp(end, Expr(int64_t{0}), cast<int64_t>(last)));
}

// Ends made by arithmetic on infinite ends (inf - inf, 0 * inf) are NaN; the range's flag then
// holds, and the end is taken as the widest, so ends stay ordered. An int end is left as it is.
Expr widenedEnd(const Expr& end, const Expr& widest) {
  return end.type().is_float() ? select(isNaN(end), widest, end) : end;
}

Range ordered(const Expr& lo, const Expr& hi, const Expr& nan) {
  return known(widenedEnd(lo, negativeInf()), widenedEnd(hi, positiveInf()), nan);
}

Truth either() {
  return {cast<bool>(true), cast<bool>(true)};
}

// The most summary lookups, or direct reads of a box, per aux read per block: past them the read
// is taken as unbounded.
constexpr int64_t kMaxLookups = 64;

// Whether a node's value can change inside a tile: it reads q_idx, kv_idx, qpos or an aux
// tensor (whose indices might).
bool varies(const Node& n) {
  return expr::contains(n, [](const Node& m) {
    return m.op == Op::Aux ||
           (m.op == Op::Variable && (m.name == "q_idx" || m.name == "kv_idx" || m.name == "qpos"));
  });
}

// The reads of aux tensors under `n` that vary along exactly one dimension: (tensor, dimension).
void varyingReads(const Node& n, std::set<std::pair<std::string, int>>& reads) {
  for (const Node& a : n.args)
    varyingReads(a, reads);
  if (n.op != Op::Aux)
    return;
  int varying = -1, count = 0;
  for (size_t k = 0; k < n.args.size(); ++k)
    if (varies(n.args[k])) {
      varying = static_cast<int>(k);
      ++count;
    }
  if (count == 1)
    reads.insert({n.name, varying});
}

// How a node reads the rows and keys when it reads them only as blocks: q_idx // rowBlock and
// kv_idx // keyBlock, one block size each (0: not read), and never qpos or score. Its value is
// then one per pair of blocks.
struct BlockReads {
  int64_t rowBlock = 0, keyBlock = 0;
  bool readsOrDraws = false; // an aux read or a philox() draw, which intervals bound loosely
};

class TileBounds {
public:
  TileBounds(const TileRanges& tile, const Spec& spec, const std::map<std::string, ImageParam>& aux,
             const AuxSummaries& summaries, const TabledDraws& draws)
      : tile_(tile), spec_(spec), aux_(aux), summaries_(summaries), draws_(draws) {}

  Truth truth(const Node& n) const {
    if (n.op != Op::BoolLiteral && sameOverTile(n)) {
      const Expr value = valueOverTile(n);
      return {value, !value};
    }
    if (n.op != Op::BoolLiteral)
      if (const std::optional<Truth> exact = perBlockPair(n))
        return *exact;
    switch (n.op) {
    case Op::BoolLiteral: return {cast<bool>(n.intValue != 0), cast<bool>(n.intValue == 0)};
    case Op::Not: {
      const Truth a = truth(n.args[0]);
      return {a.canBeFalse, a.canBeTrue};
    }
    case Op::And: {
      const Truth a = truth(n.args[0]), b = truth(n.args[1]);
      return {a.canBeTrue && b.canBeTrue, a.canBeFalse || b.canBeFalse};
    }
    case Op::Or: {
      const Truth a = truth(n.args[0]), b = truth(n.args[1]);
      return {a.canBeTrue || b.canBeTrue, a.canBeFalse && b.canBeFalse};
    }
    case Op::Where: {
      const Truth c = truth(n.args[0]), a = truth(n.args[1]), b = truth(n.args[2]);
      return {(c.canBeTrue && a.canBeTrue) || (c.canBeFalse && b.canBeTrue),
              (c.canBeTrue && a.canBeFalse) || (c.canBeFalse && b.canBeFalse)};
    }
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge:
    case Op::Eq:
    case Op::Ne: return compared(n);
    default: return either(); // aux reads of bools do not exist; bit() is not bounded here
    }
  }

private:
  // Whether `n` has one value over the tile: it reads no row, key or aux tensor (b, h, g, Tq, Tk,
  // literals and params), and draws nothing (unrolled Philox rounds in a block loop's predicate
  // take Halide minutes to compile). Such a part is its value, not a bound: an aux index
  // `b % 9` is the one element b reads, where % alone bounds it by [0, 8] (and the read took
  // element 0 for every b).
  static bool sameOverTile(const Node& n) {
    return n.op != Op::IntLiteral && n.op != Op::FloatLiteral && !varies(n) &&
           !expr::contains(n, [](const Node& m) { return m.op == Op::Philox; });
  }

  Expr valueOverTile(const Node& n) const {
    const TileRanges& t = tile_;
    return translate(n, {t.b, t.h, t.g, t.firstRow, t.firstKey, t.firstPos, t.tq, t.tk, Expr()},
                     spec_, aux_);
  }

  // Whether `n` reads the rows and keys only as blocks (expr::blockOf), recording how in
  // `reads`, and draws only inside the tabled parts, whose tables are read at a row and key of
  // the block.
  bool readsBlocks(const Node& n, BlockReads& reads) const {
    reads.rowBlock = expr::blockOf(n, "q_idx");
    reads.keyBlock = expr::blockOf(n, "kv_idx");
    if (reads.rowBlock == 1 || reads.keyBlock == 1)
      return false;
    const auto tabled = [&](const Node& m) {
      return !draws_.empty() && draws_.count(drawIdentity(m)) != 0;
    };
    const std::function<bool(const Node&)> drawsOutsideTables = [&](const Node& m) {
      return !tabled(m) && (m.op == Op::Philox ||
                            std::any_of(m.args.begin(), m.args.end(), drawsOutsideTables));
    };
    if (drawsOutsideTables(n))
      return false;
    reads.readsOrDraws =
        expr::contains(n, [&](const Node& m) { return m.op == Op::Aux || tabled(m); });
    return true;
  }

  // A bool that reads the rows and keys only as blocks and reads a tensor or draws, evaluated
  // at one row and one key of each pair of blocks the tile overlaps: at most (span / block + 2)
  // blocks along each side. nullopt for any other node, or past kMaxLookups pairs.
  std::optional<Truth> perBlockPair(const Node& n) const {
    BlockReads reads;
    if (!readsBlocks(n, reads) || !reads.readsOrDraws ||
        (reads.rowBlock == 0 && reads.keyBlock == 0))
      return std::nullopt;
    auto blocksAlong = [](int64_t block, int extent) {
      return block == 0 ? int64_t{1} : (extent - 1) / block + 2;
    };
    const int64_t rowBlocks = blocksAlong(reads.rowBlock, tile_.maxRows);
    const int64_t keyBlocks = blocksAlong(reads.keyBlock, tile_.maxKeys);
    if (rowBlocks * keyBlocks > kMaxLookups)
      return std::nullopt;
    // The c-th block from the first one's start, inside [first, last]: past the last block it
    // repeats the last.
    auto member = [](Expr first, Expr last, int64_t block, int64_t c) {
      if (block == 0)
        return first;
      const int size = static_cast<int>(block);
      return clamp((first / size + static_cast<int>(c)) * size, first, last);
    };
    const Expr offset = tile_.firstPos - tile_.firstRow;
    Expr canBeTrue = cast<bool>(false), canBeFalse = cast<bool>(false);
    for (int64_t r = 0; r < rowBlocks; ++r)
      for (int64_t c = 0; c < keyBlocks; ++c) {
        const Expr row = member(tile_.firstRow, tile_.lastRow, reads.rowBlock, r);
        const Expr key = member(tile_.firstKey, tile_.lastKey, reads.keyBlock, c);
        const ExprPoint point{tile_.b,  tile_.h,  tile_.g,  row,   key,
                              row + offset, tile_.tq, tile_.tk, Expr()};
        const Expr value = translate(n, point, spec_, aux_, draws_);
        canBeTrue = canBeTrue || value;
        canBeFalse = canBeFalse || !value;
      }
    return Truth{canBeTrue, canBeFalse};
  }

  Truth compared(const Node& n) const {
    if (n.args[0].type == expr::Type::Bool) // bool == bool: bounded only through its operands
      return either();
    const bool floats = n.args[0].type == expr::Type::Float || n.args[1].type == expr::Type::Float;
    const Range a = as(range(n.args[0]), floats), b = as(range(n.args[1]), floats);
    if (!a.known || !b.known)
      return either();
    // A comparison with NaN is false (true for !=), and the ordered values do the rest.
    const Expr unordered = a.nan || b.nan;
    const Truth ordered = orderedComparison(n.op, a, b);
    return {ordered.canBeTrue || unordered, ordered.canBeFalse || unordered};
  }

  static Truth orderedComparison(Op op, const Range& a, const Range& b) {
    // a < b can hold when a's least is below b's greatest, and fail when a's greatest is at or
    // above b's least; the others follow by symmetry.
    switch (op) {
    case Op::Lt: return {a.lo < b.hi, a.hi >= b.lo};
    case Op::Le: return {a.lo <= b.hi, a.hi > b.lo};
    case Op::Gt: return {a.hi > b.lo, a.lo <= b.hi};
    case Op::Ge: return {a.hi >= b.lo, a.lo < b.hi};
    default: break;
    }
    // == holds somewhere when the ranges overlap, and fails somewhere unless both are one and
    // the same point; != the other way round.
    const Expr overlap = a.lo <= b.hi && b.lo <= a.hi;
    const Expr onePoint = a.lo == a.hi && b.lo == b.hi && a.lo == b.lo;
    return op == Op::Eq ? Truth{overlap, !onePoint} : Truth{!onePoint, overlap};
  }

  static Range as(const Range& r, bool floats) {
    if (!r.known || !floats)
      return r;
    return known(cast<float>(r.lo), cast<float>(r.hi), r.nan);
  }

  static std::optional<double> literal(const Node& n) {
    if (n.op == Op::IntLiteral)
      return static_cast<double>(n.intValue);
    if (n.op == Op::FloatLiteral)
      return n.floatValue;
    return std::nullopt;
  }

  std::optional<double> constantOf(const Node& n) const {
    if (n.op == Op::Param)
      for (const SpecParam& p : spec_.params)
        if (p.name == n.name)
          return p.value.number();
    if (n.op == Op::Neg)
      if (auto c = constantOf(n.args[0]))
        return -*c;
    return literal(n);
  }

  Range range(const Node& n) const {
    const bool floats = n.type == expr::Type::Float;
    if (sameOverTile(n)) {
      const Expr value = valueOverTile(n);
      return floats ? ofValue(value) : known(cast<int64_t>(value), cast<int64_t>(value));
    }
    auto arg = [&](size_t i) { return as(range(n.args[i]), floats); };
    switch (n.op) {
    case Op::IntLiteral:
    case Op::FloatLiteral: { // a param has one value over the tile (above)
      const double c = *constantOf(n);
      const Expr e = floats ? Expr(static_cast<float>(c)) : Expr(static_cast<int64_t>(c));
      return known(e, e);
    }
    case Op::Variable: return variable(n.name);
    case Op::Neg: {
      const Range a = arg(0);
      if (!a.known)
        return a;
      return floats ? negated(a) : intRange(-a.hi, -a.lo);
    }
    case Op::Add:
    case Op::Sub: {
      const Range a = arg(0), b = arg(1);
      if (!a.known || !b.known)
        return {};
      // inf - inf is NaN: a sum of infinities of both signs, or a difference of one sign.
      const Range c = n.op == Op::Add ? b : negated(b);
      const Expr cancels = floats ? (isPositiveInf(a.hi) && isNegativeInf(c.lo)) ||
                                        (isNegativeInf(a.lo) && isPositiveInf(c.hi))
                                  : cast<bool>(false);
      if (!floats)
        return intRange(a.lo + c.lo, a.hi + c.hi);
      return ordered(a.lo + c.lo, a.hi + c.hi, a.nan || c.nan || cancels);
    }
    case Op::Mul: {
      const Range a = arg(0), b = arg(1);
      if (!a.known || !b.known)
        return {};
      // 0 * inf is NaN: one range holds 0 and the other reaches an infinity. Such a product
      // of ends stands for the 0 * x beside it, so it counts as 0.
      auto product = [&](const Expr& x, const Expr& y) { return widenedEnd(x * y, 0.0f); };
      const Expr p1 = product(a.lo, b.lo), p2 = product(a.lo, b.hi), p3 = product(a.hi, b.lo),
                 p4 = product(a.hi, b.hi);
      const Expr zeroTimesInf =
          floats ? (holdsZero(a) && (isInf(b.lo) || isInf(b.hi))) ||
                       (holdsZero(b) && (isInf(a.lo) || isInf(a.hi)))
                 : cast<bool>(false);
      const Expr lo = min(min(p1, p2), min(p3, p4)), hi = max(max(p1, p2), max(p3, p4));
      return floats ? known(lo, hi, a.nan || b.nan || zeroTimesInf) : intRange(lo, hi);
    }
    case Op::Div: {
      // By a constant only: a range that may hold 0 divides to anything.
      const auto divisor = constantOf(n.args[1]);
      const Range a = as(range(n.args[0]), true);
      if (!a.known || !divisor || *divisor == 0)
        return {};
      const Expr d = static_cast<float>(*divisor);
      return *divisor > 0 ? known(a.lo / d, a.hi / d, a.nan) : known(a.hi / d, a.lo / d, a.nan);
    }
    case Op::Mod: {
      const auto m = constantOf(n.args[1]);
      if (!m || *m == 0)
        return {};
      const int64_t mod = static_cast<int64_t>(*m);
      const Expr zero = Expr(int64_t{0});
      return mod > 0 ? known(zero, Expr(mod - 1)) : known(Expr(mod + 1), zero);
    }
    case Op::FloorDiv: {
      // By a positive constant, where Halide's division is floor division: monotone.
      const auto m = constantOf(n.args[1]);
      const Range a = arg(0);
      if (!a.known || !m || *m <= 0)
        return {};
      const Expr d = Expr(static_cast<int64_t>(*m));
      return known(a.lo / d, a.hi / d);
    }
    case Op::Min:
    case Op::Max:
    case Op::Clamp: {
      Range r = arg(0);
      for (size_t i = 1; i < n.args.size(); ++i) {
        const Range other = arg(i);
        if (!r.known || !other.known)
          return {};
        const bool lower = n.op == Op::Min || (n.op == Op::Clamp && i == 2);
        r = lower ? least(r, other) : greatest(r, other);
      }
      return r;
    }
    case Op::Abs: {
      const Range a = arg(0);
      if (!a.known)
        return {};
      const Expr zero = floats ? Expr(0.0f) : Expr(int64_t{0});
      const Range minus = negated(a);
      const Expr lo = select(a.lo >= zero, a.lo, a.hi <= zero, minus.lo, zero);
      return floats ? known(lo, max(minus.hi, a.hi), a.nan) : intRange(lo, max(minus.hi, a.hi));
    }
    case Op::Where: {
      const Truth c = truth(n.args[0]);
      const Range a = arg(1), b = arg(2);
      if (!a.known || !b.known)
        return {};
      return known(select(!c.canBeFalse, a.lo, !c.canBeTrue, b.lo, min(a.lo, b.lo)),
                   select(!c.canBeFalse, a.hi, !c.canBeTrue, b.hi, max(a.hi, b.hi)),
                   (c.canBeTrue && a.nan) || (c.canBeFalse && b.nan));
    }
    case Op::Floor: {
      const Range a = range(n.args[0]);
      if (!a.known || n.args[0].type == expr::Type::Int)
        return a;
      // floor saturates, so it is monotone; NaN floors to 0.
      const Expr lo = cast<int64_t>(floorToInt32(a.lo)), hi = cast<int64_t>(floorToInt32(a.hi));
      const Expr zero = Expr(int64_t{0});
      return known(select(a.nan, min(lo, zero), lo), select(a.nan, max(hi, zero), hi));
    }
    case Op::Aux: return auxRange(n);
    default: return {}; // transcendental functions
    }
  }

  // {-x : x in r}, its ends exact (the int ends in int64), a float's by its sign bit (IEEE's
  // negation; Halide's is 0 - x).
  static Range negated(const Range& r) {
    if (!r.lo.type().is_float())
      return known(-r.hi, -r.lo);
    return known(ieeeNegate(r.hi), ieeeNegate(r.lo), r.nan);
  }

  // min(x, y) over x in a and y in b, as the language has it (fmin): a NaN operand gives the
  // other, so where either may be NaN the other's values can come through whole.
  static Range least(const Range& a, const Range& b) {
    const Expr eitherNaN = a.nan || b.nan;
    return known(min(a.lo, b.lo), select(eitherNaN, max(a.hi, b.hi), min(a.hi, b.hi)),
                 a.nan && b.nan);
  }

  static Range greatest(const Range& a, const Range& b) {
    const Expr eitherNaN = a.nan || b.nan;
    return known(select(eitherNaN, min(a.lo, b.lo), max(a.lo, b.lo)), max(a.hi, b.hi),
                 a.nan && b.nan);
  }

  static Expr holdsZero(const Range& r) {
    return r.lo <= 0.0f && r.hi >= 0.0f;
  }

  // The most an int index's value can differ between two elements of one tile, known when the
  // kernel is built; nullopt when not bounded so.
  std::optional<int64_t> spanOf(const Node& n) const {
    auto spans = [&](size_t i) { return spanOf(n.args[i]); };
    switch (n.op) {
    case Op::IntLiteral:
    case Op::FloatLiteral:
    case Op::Param: return 0;
    case Op::Variable:
      if (n.name == "q_idx" || n.name == "qpos")
        return tile_.maxRows - 1;
      if (n.name == "kv_idx")
        return tile_.maxKeys - 1;
      return 0; // b, h, g, Tq, Tk: one value per tile
    case Op::Neg:
    case Op::Abs: return spans(0);
    case Op::Add:
    case Op::Sub: {
      const auto a = spans(0), b = spans(1);
      return a && b ? std::optional<int64_t>(*a + *b) : std::nullopt;
    }
    case Op::Mul: {
      const auto a = spans(0), b = spans(1);
      const auto ka = constantOf(n.args[0]), kb = constantOf(n.args[1]);
      if (a && kb)
        return static_cast<int64_t>(std::ceil(std::fabs(*kb) * static_cast<double>(*a)));
      if (b && ka)
        return static_cast<int64_t>(std::ceil(std::fabs(*ka) * static_cast<double>(*b)));
      return std::nullopt;
    }
    case Op::Div: {
      const auto a = spans(0);
      const auto d = constantOf(n.args[1]);
      if (!a || !d || *d == 0)
        return std::nullopt;
      return static_cast<int64_t>(std::ceil(static_cast<double>(*a) / std::fabs(*d)));
    }
    case Op::Floor: {
      const auto a = spans(0);
      return a ? std::optional<int64_t>(*a + 1) : std::nullopt;
    }
    case Op::Mod: {
      const auto a = spans(0);
      const auto m = constantOf(n.args[1]);
      if (!a || !m || *m == 0)
        return std::nullopt;
      return std::min<int64_t>(*a, static_cast<int64_t>(std::fabs(*m)) - 1);
    }
    case Op::FloorDiv: {
      // floor(hi / m) - floor(lo / m) <= floor((hi - lo) / |m|) + 1.
      const auto a = spans(0);
      const auto m = constantOf(n.args[1]);
      if (!a || !m || *m == 0)
        return std::nullopt;
      return *a / static_cast<int64_t>(std::fabs(*m)) + 1;
    }
    case Op::Min:
    case Op::Max:
    case Op::Clamp: {
      // min(a, b) lies in [min(lo_a, lo_b), min(hi_a, hi_b)]: no wider than the wider operand.
      int64_t widest = 0;
      for (size_t i = 0; i < n.args.size(); ++i) {
        const auto s = spans(i);
        if (!s)
          return std::nullopt;
        widest = std::max(widest, *s);
      }
      return widest;
    }
    default: return std::nullopt; // where, aux reads, transcendental functions
    }
  }

  // The least and greatest element over the indices' ranges: one index varying over the tile
  // is scanned from its least to its greatest value through the tensor's summary; several (a
  // block table read at q_idx // 64, kv_idx // 64) through the elements of the box they span,
  // read directly when their spans, known when the kernel is built, make few of them. The
  // indices that do not vary are fixed for the tile.
  Range auxRange(const Node& n) const {
    const ImageParam& tensor = aux_.at(n.name);
    const int rank = static_cast<int>(n.args.size());
    std::vector<int> varying;
    std::vector<Range> indices;
    for (int k = 0; k < rank; ++k) {
      indices.push_back(range(n.args[k]));
      if (!indices.back().known)
        return {};
      if (varies(n.args[k]))
        varying.push_back(k);
    }
    // Halide numbers dimensions innermost first: index k is dim rank-1-k.
    auto last = [&](int k) { return tensor.dim(rank - 1 - k).extent() - 1; };
    std::vector<Expr> at(rank);
    for (int k = 0; k < rank; ++k)
      at[rank - 1 - k] = clampedIndex(indices[k].lo, last(k));
    if (varying.empty())
      return ofValue(tensor(at));
    if (varying.size() > 1)
      return boxRange(tensor, indices, varying, at, n);
    const std::optional<int64_t> span = spanOf(n.args[varying.front()]);
    const AuxSummaries::Summary* summary = summaries_.find(n.name, varying.front());
    if (!span || !summary || *span / kSummaryChunk + 2 > kMaxLookups)
      return {};
    // The chunks the index's range touches: at most span / chunk + 2 of them.
    const int k = varying.front();
    const Expr first = clampedIndex(indices[k].lo, last(k));
    const Expr lastChunk = max(clampedIndex(indices[k].hi, last(k)), first) / kSummaryChunk;
    Expr least, greatest, nan = cast<bool>(false);
    for (int64_t c = 0; c <= *span / kSummaryChunk + 1; ++c) {
      at[rank - 1 - k] = min(first / kSummaryChunk + static_cast<int>(c), lastChunk);
      const Expr low = summary->least(at), high = summary->greatest(at);
      least = c == 0 ? low : min(least, low);
      greatest = c == 0 ? high : max(greatest, high);
      if (summary->nan.defined())
        nan = nan || summary->nan(at);
    }
    if (!least.type().is_float())
      return known(cast<int64_t>(least), cast<int64_t>(greatest));
    return known(least, greatest, nan);
  }

  // Every element of the box the varying indices span, clamped into the tensor as the kernel's
  // reads are: index k takes at most span_k + 1 values over a tile, lo_k, lo_k + 1, ... up to
  // hi_k. `at` holds the fixed indices.
  Range boxRange(const ImageParam& tensor, const std::vector<Range>& indices,
                 const std::vector<int>& varying, std::vector<Expr> at, const Node& n) const {
    const int rank = static_cast<int>(indices.size());
    std::vector<int64_t> counts;
    int64_t reads = 1;
    for (int k : varying) {
      const std::optional<int64_t> span = spanOf(n.args[k]);
      if (!span || *span + 1 > kMaxLookups)
        return {};
      counts.push_back(*span + 1);
      reads *= counts.back();
      if (reads > kMaxLookups)
        return {};
    }
    Range box;
    for (int64_t flat = 0; flat < reads; ++flat) {
      int64_t rest = flat;
      for (size_t v = 0; v < varying.size(); ++v) {
        const int k = varying[v];
        const Expr last = tensor.dim(rank - 1 - k).extent() - 1;
        const Expr first = clampedIndex(indices[k].lo, last);
        at[rank - 1 - k] = min(first + static_cast<int>(rest % counts[v]),
                               max(clampedIndex(indices[k].hi, last), first));
        rest /= counts[v];
      }
      const Range value = ofValue(tensor(at));
      box = flat == 0 ? value
                      : known(min(box.lo, value.lo), max(box.hi, value.hi), box.nan || value.nan);
    }
    return box;
  }

  // The rows', keys' and positions' ranges over the tile; every other variable has one value
  // over it (sameOverTile), and score is no mask's.
  Range variable(const std::string& name) const {
    const TileRanges& t = tile_;
    auto between = [](const Expr& first, const Expr& last) {
      return known(cast<int64_t>(first), cast<int64_t>(last));
    };
    if (name == "q_idx")
      return between(t.firstRow, t.lastRow);
    if (name == "kv_idx")
      return between(t.firstKey, t.lastKey);
    if (name == "qpos")
      return between(t.firstPos, t.lastPos);
    return {};
  }

  const TileRanges& tile_;
  const Spec& spec_;
  const std::map<std::string, ImageParam>& aux_;
  const AuxSummaries& summaries_;
  const TabledDraws& draws_;
};

} // namespace

AuxSummaries::AuxSummaries(const std::optional<Node>& mask,
                           const std::map<std::string, ImageParam>& aux) {
  if (!mask)
    return;
  std::set<std::pair<std::string, int>> reads;
  varyingReads(*mask, reads);
  for (const auto& [name, varying] : reads) {
    const ImageParam& tensor = aux.at(name);
    const int rank = tensor.dimensions(), dim = rank - 1 - varying; // Halide's order
    std::vector<Var> vars;
    for (int d = 0; d < rank; ++d)
      vars.emplace_back("i" + std::to_string(d));
    RDom within(0, kSummaryChunk, name + "_chunk");
    std::vector<Expr> at(vars.begin(), vars.end());
    at[dim] = min(vars[dim] * kSummaryChunk + within, tensor.dim(dim).extent() - 1);
    Summary summary{Func(name + "_least_" + std::to_string(varying)),
                    Func(name + "_greatest_" + std::to_string(varying)), Func()};
    // A float chunk's least and greatest are over its values that are not NaN (+inf and -inf
    // when it has none), and `nan` says whether it has a NaN.
    const Expr value = tensor(at);
    if (value.type().is_float()) {
      summary.nan = Func(name + "_nan_" + std::to_string(varying));
      summary.nan(vars) = maximum(isNaN(value));
      summary.least(vars) = minimum(select(isNaN(value), positiveInf(), value));
      summary.greatest(vars) = maximum(select(isNaN(value), negativeInf(), value));
    } else {
      summary.least(vars) = minimum(value);
      summary.greatest(vars) = maximum(value);
    }
    summaries_.emplace(std::pair{name, varying}, summary);
  }
}

const AuxSummaries::Summary* AuxSummaries::find(const std::string& tensor, int dimension) const {
  const auto it = summaries_.find({tensor, dimension});
  return it == summaries_.end() ? nullptr : &it->second;
}

std::vector<Func> AuxSummaries::funcs() const {
  std::vector<Func> all;
  for (const auto& [key, summary] : summaries_) {
    all.push_back(summary.least);
    all.push_back(summary.greatest);
    if (summary.nan.defined())
      all.push_back(summary.nan);
  }
  return all;
}

TileClass classifyMask(const Node& mask, const TileRanges& tile, const Spec& spec,
                       const std::map<std::string, ImageParam>& aux, const AuxSummaries& summaries,
                       const TabledDraws& draws) {
  const Truth truth = TileBounds(tile, spec, aux, summaries, draws).truth(mask);
  return {withIeeeFloats(mask, truth.canBeTrue), withIeeeFloats(mask, truth.canBeFalse)};
}

} // namespace attnc::halide
