//===- ExpressionBounds.cpp - the tile classifier of the MLIR lowerings ----------===//
#include "attn/Transforms/ExpressionBounds.h"

#include "attn/IR/AttnOps.h"
#include "attn/Kit/Builders.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/DenseMap.h"

using namespace mlir;

namespace attnc::attn {
namespace {

// A number's range [lo, hi] (scalars of its type), or unknown (null). NaN is no point of the
// order, so a float's range bounds its other values, and `nan` (i1; null: never) says whether it
// may be NaN.
struct Range {
  Value lo, hi, nan;
  explicit operator bool() const { return lo && hi; }
};

// Which values a bool can take over the domain (i1 scalars).
struct Truth {
  Value canBeTrue, canBeFalse;
};

// The most elements an aux read's bound scans per domain: past it the read is unbounded.
constexpr int64_t kMaxScan = 4096;

// The coordinate an aux index follows one to one (the argument plus or minus constants).
enum class Follows { Nothing, Row, Key };
Follows follows(Value index) {
  Operation* def = index.getDefiningOp();
  if (def && isa<arith::AddIOp, arith::SubIOp>(def)) {
    for (unsigned i = 0; i < 2; ++i)
      if (def->getOperand(1 - i).getDefiningOp<arith::ConstantOp>() &&
          (i == 0 || isa<arith::AddIOp>(def)))
        return follows(def->getOperand(i));
    return Follows::Nothing;
  }
  auto argument = dyn_cast<BlockArgument>(index);
  if (!argument)
    return Follows::Nothing;
  switch (static_cast<ExpressionArgument>(argument.getArgNumber())) {
  case ExpressionArgument::QIdx:
  case ExpressionArgument::QPos: return Follows::Row;
  case ExpressionArgument::KvIdx: return Follows::Key;
  default: return Follows::Nothing;
  }
}

// Whether a read takes one index following the rows and another following the keys: a
// per-score tensor (such as the tensor mask), whose box is the domain's rows x keys, as costly
// to scan as the kernel's own read of it at every score; it is left unbounded.
bool readsPerScore(AuxLoadOp load) {
  bool row = false, key = false;
  for (Value index : load.getIndices()) {
    const Follows f = follows(index);
    row |= f == Follows::Row;
    key |= f == Follows::Key;
  }
  return row && key;
}

class Bounds {
public:
  Bounds(ImplicitLocOpBuilder& b, ValueRange aux) : b(b), aux(aux) {}

  // Bounds every op of the block in order; the arguments are bound beforehand.
  Truth maskOf(Block& block, const DomainCorners& corners) {
    for (size_t k = index(ExpressionArgument::B); k < block.getNumArguments(); ++k)
      ranges[block.getArgument(k)] = {corners.first[k], corners.last[k]};
    for (Operation& op : block.without_terminator())
      bound(op);
    return truth(cast<gpu::YieldOp>(block.getTerminator()).getValues().front());
  }

private:
  Value boolean(bool value) { return b.create<arith::ConstantIntOp>(value, 1); }
  Truth either() { return {boolean(true), boolean(true)}; }
  Value both(Value x, Value y) { return b.create<arith::AndIOp>(x, y); }
  Value any(Value x, Value y) { return b.create<arith::OrIOp>(x, y); }
  Value negate(Value x) { return b.create<arith::XOrIOp>(x, boolean(true)); }

  bool isFloat(Value v) { return isa<FloatType>(v.getType()); }
  Value isNaN(Value x) { return b.create<arith::CmpFOp>(arith::CmpFPredicate::UNO, x, x); }
  Value mayBeNaN(const Range& r) { return r.nan ? r.nan : boolean(false); }
  Value infinity(Type type, bool negative) {
    return b.create<arith::ConstantOp>(
        b.getFloatAttr(type, APFloat::getInf(cast<FloatType>(type).getFloatSemantics(), negative)));
  }
  // A range's end that came out NaN (inf - inf, inf * 0 or inf / inf at a corner) as the
  // infinity on its side, which bounds any values.
  Value orInfinity(Value end, bool negative) {
    return b.create<arith::SelectOp>(isNaN(end), infinity(end.getType(), negative), end);
  }
  Value minimum(Value x, Value y) {
    return isFloat(x) ? Value(b.create<arith::MinNumFOp>(x, y))
                      : Value(b.create<arith::MinSIOp>(x, y));
  }
  Value maximum(Value x, Value y) {
    return isFloat(x) ? Value(b.create<arith::MaxNumFOp>(x, y))
                      : Value(b.create<arith::MaxSIOp>(x, y));
  }
  Value less(Value x, Value y) {
    return isFloat(x) ? Value(b.create<arith::CmpFOp>(arith::CmpFPredicate::OLT, x, y))
                      : Value(b.create<arith::CmpIOp>(arith::CmpIPredicate::slt, x, y));
  }
  Value lessOrEqual(Value x, Value y) {
    return isFloat(x) ? Value(b.create<arith::CmpFOp>(arith::CmpFPredicate::OLE, x, y))
                      : Value(b.create<arith::CmpIOp>(arith::CmpIPredicate::sle, x, y));
  }
  Value zeroLike(Value x) { return b.create<arith::ConstantOp>(b.getZeroAttr(x.getType())); }
  // Whether a float range reaches -inf or +inf, and whether it holds 0.
  Value reachesInfinity(const Range& r) {
    auto equal = [&](Value x, Value y) {
      return b.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, x, y);
    };
    return any(equal(r.lo, infinity(r.lo.getType(), true)),
               equal(r.hi, infinity(r.hi.getType(), false)));
  }
  Value holdsZero(const Range& r) {
    Value zero = zeroLike(r.lo);
    return both(lessOrEqual(r.lo, zero), lessOrEqual(zero, r.hi));
  }
  // The least or greatest signed int of `type`'s width, as a constant of `type`.
  Value signedLimit(Type type, bool greatest, unsigned width = 0) {
    width = width ? width : type.getIntOrFloatBitWidth();
    const APInt v = greatest ? APInt::getSignedMaxValue(width) : APInt::getSignedMinValue(width);
    return b.create<arith::ConstantOp>(b.getIntegerAttr(type, v.getSExtValue()));
  }

  // A value defined outside the block (a hoisted constant) or before this op.
  // The range of op's operand i.
  Range operand(Operation& op, unsigned i) { return range(op.getOperand(i)); }

  Range range(Value v) {
    if (auto it = ranges.find(v); it != ranges.end())
      return it->second;
    if (auto constant = v.getDefiningOp<arith::ConstantOp>()) {
      auto value = dyn_cast<FloatAttr>(constant.getValue());
      return {constant, constant, value ? boolean(value.getValue().isNaN()) : Value()};
    }
    return {};
  }
  Truth truth(Value v) {
    if (auto it = truths.find(v); it != truths.end())
      return it->second;
    if (auto constant = v.getDefiningOp<arith::ConstantIntOp>())
      return {boolean(constant.value() != 0), boolean(constant.value() == 0)};
    return either();
  }

  void bound(Operation& op) {
    if (op.getNumResults() != 1)
      return;
    Value result = op.getResult(0);
    if (result.getType().isInteger(1))
      truths[result] = truthOf(op);
    else if (Range r = rangeOf(op))
      ranges[result] = r;
    if (!keepsPoints(op))
      exactAtPoints(op);
  }

  // Whether the op's rule above bounds it to one point when its operands are points.
  static bool keepsPoints(Operation& op) {
    Type type = op.getResult(0).getType();
    if (auto compare = dyn_cast<arith::CmpIOp>(&op)) { // truthOf's signed, eq and ne rules
      using P = arith::CmpIPredicate;
      const P p = compare.getPredicate();
      return !compare.getLhs().getType().isInteger(1) &&
             (p == P::slt || p == P::sle || p == P::sgt || p == P::sge || p == P::eq ||
              p == P::ne);
    }
    if (isa<arith::ConstantOp, arith::SelectOp, arith::ExtUIOp, math::AbsIOp, arith::MinSIOp,
            arith::MaxSIOp>(op))
      return true;
    if (auto divide = dyn_cast<arith::DivSIOp>(&op))
      return divide.getRhs().getDefiningOp<arith::ConstantIntOp>() != nullptr;
    if (isa<arith::AndIOp, arith::OrIOp, arith::XOrIOp>(op))
      return type.isInteger(1);
    if (isa<arith::AddIOp, arith::SubIOp, arith::MulIOp>(op))
      return type.isInteger(32);
    return false;
  }

  // An int op with no such rule (bit operations, shifts, truncations, remainders, the 64-bit
  // products of philox()'s rounds) is exact where each operand is one point over the domain:
  // the op evaluated at the points, else its rule's bound (or anything). So a draw whose
  // counters are constant over a chunk (BigBird's q_idx // block and kv_idx // block) is the
  // chunk's one value, and a block it does not draw is ruled out.
  void exactAtPoints(Operation& op) {
    Value result = op.getResult(0);
    // Arithmetic only: an aux read is bounded by its scan, which a point index makes exact.
    if (!isa<IntegerType>(result.getType()) || !isa<arith::ArithDialect>(op.getDialect()) ||
        !isPure(&op))
      return;
    IRMapping points;
    Value allPoints = boolean(true);
    for (Value operand : op.getOperands()) {
      if (!isa<IntegerType>(operand.getType()))
        return;
      if (operand.getType().isInteger(1)) {
        Truth t = truth(operand);
        allPoints = both(allPoints, b.create<arith::XOrIOp>(t.canBeTrue, t.canBeFalse));
        points.map(operand, t.canBeTrue);
        continue;
      }
      Range r = range(operand);
      if (!r)
        return;
      allPoints = both(allPoints, negate(less(r.lo, r.hi)));
      points.map(operand, r.lo);
    }
    // The copy runs whatever the operands' ranges (only its value is picked by allPoints): a
    // remainder's or quotient's divisor there is 1 unless it is a point other than 0 and -1
    // (x rem 0 traps, INT_MIN rem -1 overflows; the language's % and // never divide so).
    if (isa<arith::RemSIOp, arith::RemUIOp, arith::DivSIOp, arith::DivUIOp, arith::CeilDivSIOp,
            arith::CeilDivUIOp, arith::FloorDivSIOp>(op)) {
      Value divisor = points.lookup(op.getOperand(1));
      Value safe = both(negate(b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, divisor,
                                                       zeroLike(divisor))),
                        negate(b.create<arith::CmpIOp>(
                            arith::CmpIPredicate::eq, divisor,
                            b.create<arith::ConstantOp>(b.getIntegerAttr(divisor.getType(), -1)))));
      allPoints = both(allPoints, safe);
      points.map(op.getOperand(1),
                 b.create<arith::SelectOp>(
                     allPoints, divisor,
                     b.create<arith::ConstantOp>(b.getIntegerAttr(divisor.getType(), 1))));
    }
    Value exact = b.clone(op, points)->getResult(0);
    if (result.getType().isInteger(1)) {
      Truth t = truth(result);
      truths[result] = {b.create<arith::SelectOp>(allPoints, exact, t.canBeTrue),
                        b.create<arith::SelectOp>(allPoints, negate(exact), t.canBeFalse)};
      return;
    }
    Range r = range(result);
    if (!r)
      r = {signedLimit(result.getType(), false), signedLimit(result.getType(), true)};
    ranges[result] = {b.create<arith::SelectOp>(allPoints, exact, r.lo),
                      b.create<arith::SelectOp>(allPoints, exact, r.hi)};
  }

  // The range of an i32 add, subtract or multiply, its ends formed in i64: the whole i32 range
  // when an end leaves it, since the kernel's i32 arithmetic wraps there (an unscanned aux
  // read's range is the whole i32 range, whose negation wraps).
  Range wrapping(Operation& op, Range x, Range y) {
    Type narrow = x.lo.getType(), wide = b.getI64Type();
    auto extend = [&](Value v) { return b.create<arith::ExtSIOp>(wide, v); };
    auto apply = [&](Value p, Value q) {
      OperationState state(b.getLoc(), op.getName());
      state.addOperands({extend(p), extend(q)});
      state.addTypes(wide);
      return b.create(state)->getResult(0);
    };
    Value lo, hi;
    if (isa<arith::AddIOp>(op)) {
      lo = apply(x.lo, y.lo);
      hi = apply(x.hi, y.hi);
    } else if (isa<arith::SubIOp>(op)) {
      lo = apply(x.lo, y.hi);
      hi = apply(x.hi, y.lo);
    } else {
      Value p1 = apply(x.lo, y.lo), p2 = apply(x.lo, y.hi), p3 = apply(x.hi, y.lo),
            p4 = apply(x.hi, y.hi);
      lo = minimum(minimum(p1, p2), minimum(p3, p4));
      hi = maximum(maximum(p1, p2), maximum(p3, p4));
    }
    const unsigned width = narrow.getIntOrFloatBitWidth();
    Value wraps = any(less(lo, signedLimit(wide, false, width)),
                      less(signedLimit(wide, true, width), hi));
    auto truncated = [&](Value v) { return b.create<arith::TruncIOp>(narrow, v); };
    return {b.create<arith::SelectOp>(wraps, signedLimit(narrow, false), truncated(lo)),
            b.create<arith::SelectOp>(wraps, signedLimit(narrow, true), truncated(hi))};
  }

  Range rangeOf(Operation& op) {
    if (isa<arith::AddIOp, arith::SubIOp, arith::MulIOp>(op)) {
      Range x = operand(op, 0), y = operand(op, 1);
      if (!x || !y || !op.getResult(0).getType().isInteger(32))
        return {};
      return wrapping(op, x, y);
    }
    if (isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::MinSIOp, arith::MinNumFOp,
            arith::MaxSIOp, arith::MaxNumFOp>(op))
      return arithmeticRange(op);
    if (isa<arith::DivFOp>(op))
      return floatQuotientRange(op);
    if (isa<arith::DivSIOp>(op))
      return intQuotientRange(op);
    if (isa<arith::NegFOp>(op)) {
      Range x = operand(op, 0);
      if (!x)
        return {};
      return {b.create<arith::NegFOp>(x.hi), b.create<arith::NegFOp>(x.lo), x.nan};
    }
    if (isa<arith::SIToFPOp, arith::FPToSIOp, math::FloorOp>(op))
      return monotoneRange(op);
    if (isa<arith::ExtUIOp>(op))
      return unsignedRange(op);
    if (isa<math::AbsIOp, math::AbsFOp>(op))
      return absoluteRange(op);
    if (isa<arith::RemSIOp>(op))
      return remainderRange(op);
    if (isa<arith::SelectOp>(op))
      return selectedRange(op);
    if (auto load = dyn_cast<AuxLoadOp>(&op))
      return auxRange(load);
    return {}; // bits, transcendental functions
  }

  // +, -, * of floats (monotone at the corners) and min / max of ints and floats.
  Range arithmeticRange(Operation& op) {
    Range x = operand(op, 0), y = operand(op, 1);
    if (!x || !y)
      return {};
    OperationName name = op.getName();
    auto apply = [&](Value p, Value q) {
      OperationState state(b.getLoc(), name);
      state.addOperands({p, q});
      state.addTypes(p.getType());
      return b.create(state)->getResult(0);
    };
    if (isa<arith::AddFOp, arith::SubFOp, arith::MulFOp>(op)) {
      // Monotone in each operand, so bounded by the values at the corners, but NaN for
      // inf - inf and inf * 0. The numbers near a NaN corner are other corners' values (or,
      // for inf * 0, 0, which lies between two of them), so minnumf and maxnumf skip it; where
      // every corner is NaN, the range is everything.
      const std::array<Value, 4> corners = {apply(x.lo, y.lo), apply(x.lo, y.hi), apply(x.hi, y.lo),
                                            apply(x.hi, y.hi)};
      Range r{corners[0], corners[0], any(any(mayBeNaN(x), mayBeNaN(y)), isNaN(corners[0]))};
      for (Value corner : llvm::drop_begin(corners)) {
        r.lo = minimum(r.lo, corner);
        r.hi = maximum(r.hi, corner);
        r.nan = any(r.nan, isNaN(corner));
      }
      // inf * 0 where the 0 lies inside the other range, which no corner shows.
      if (isa<arith::MulFOp>(op))
        r.nan = any(r.nan, any(both(reachesInfinity(x), holdsZero(y)),
                               both(reachesInfinity(y), holdsZero(x))));
      return {orInfinity(r.lo, true), orInfinity(r.hi, false), r.nan};
    }
    // min and max are monotone in both operands.
    Range r{apply(x.lo, y.lo), apply(x.hi, y.hi)};
    if (!isFloat(x.lo))
      return r;
    // But fmin and fmax give the other operand for a NaN one: where x may be NaN, min's
    // greatest value may be y's greatest (max's least y's least), and likewise for y.
    const bool isMin = isa<arith::MinNumFOp>(op);
    Value& end = isMin ? r.hi : r.lo;
    auto reach = [&](Value nan, Value otherEnd) {
      end = b.create<arith::SelectOp>(nan, isMin ? maximum(end, otherEnd) : minimum(end, otherEnd),
                                      end);
    };
    reach(mayBeNaN(x), isMin ? y.hi : y.lo);
    reach(mayBeNaN(y), isMin ? x.hi : x.lo);
    r.nan = both(mayBeNaN(x), mayBeNaN(y));
    return r;
  }

  // x / constant.
  Range floatQuotientRange(Operation& op) {
    auto divide = cast<arith::DivFOp>(op);
    // By a constant only: a divisor range that may hold 0 divides to anything. Monotone in x;
    // NaN for inf / inf (an end's) and for a NaN divisor.
    auto divisor = divide.getRhs().getDefiningOp<arith::ConstantFloatOp>();
    Range x = operand(op, 0);
    if (!divisor || !x || divisor.value().isZero())
      return {};
    Value lo = b.create<arith::DivFOp>(x.lo, divisor), hi = b.create<arith::DivFOp>(x.hi, divisor);
    if (divisor.value().isNegative())
      std::swap(lo, hi);
    return {orInfinity(lo, true), orInfinity(hi, false),
            any(mayBeNaN(x), any(isNaN(lo), isNaN(hi)))};
  }

  // Truncating integer division.
  Range intQuotientRange(Operation& op) {
    auto divide = cast<arith::DivSIOp>(op);
    // Truncating division by a nonzero constant is monotone, decreasing for a negative one.
    Range x = operand(op, 0);
    if (!x)
      return {};
    if (auto divisor = divide.getRhs().getDefiningOp<arith::ConstantIntOp>()) {
      if (divisor.value() == 0)
        return {};
      Value lo = b.create<arith::DivSIOp>(x.lo, divisor),
            hi = b.create<arith::DivSIOp>(x.hi, divisor);
      return divisor.value() < 0 ? Range{hi, lo} : Range{lo, hi};
    }
    // By a positive range (floor division's guarded divisor): x / d is monotone in x for each
    // d > 0 and in d for each x, so its ends are at the corners; else anything.
    Range d = operand(op, 1);
    if (!d)
      return {};
    Value positive = both(less(zeroLike(d.lo), d.lo), lessOrEqual(d.lo, d.hi));
    Value one = b.create<arith::ConstantOp>(b.getIntegerAttr(d.lo.getType(), 1));
    Value dLo = b.create<arith::SelectOp>(positive, d.lo, one),
          dHi = b.create<arith::SelectOp>(positive, d.hi, one);
    auto divided = [&](Value p, Value q) { return b.create<arith::DivSIOp>(p, q); };
    Value lo = minimum(divided(x.lo, dLo), divided(x.lo, dHi)),
          hi = maximum(divided(x.hi, dLo), divided(x.hi, dHi));
    return {b.create<arith::SelectOp>(positive, lo, signedLimit(lo.getType(), false)),
            b.create<arith::SelectOp>(positive, hi, signedLimit(hi.getType(), true))};
  }

  // An int-float conversion or floor: monotone.
  Range monotoneRange(Operation& op) {
    Range x = operand(op, 0);
    if (!x)
      return {};
    auto apply = [&](Value v) {
      OperationState state(b.getLoc(), op.getName());
      state.addOperands(v);
      state.addTypes(op.getResult(0).getType());
      return b.create(state)->getResult(0);
    };
    return {apply(x.lo), apply(x.hi), isa<math::FloorOp>(op) ? x.nan : Value()};
  }

  // An unsigned extension.
  Range unsignedRange(Operation& op) {
    auto extend = cast<arith::ExtUIOp>(op);
    // Bytes read as unsigned: the signed range's ends, unless it straddles 0 (bytes on both
    // sides of 128), when the whole byte range.
    Range x = operand(op, 0);
    if (!x)
      return {};
    Type wide = extend.getType();
    auto constant = [&](int64_t v) {
      return b.create<arith::ConstantOp>(b.getIntegerAttr(wide, v));
    };
    const int64_t largest = (int64_t{1} << x.lo.getType().getIntOrFloatBitWidth()) - 1;
    Value zero = zeroLike(x.lo);
    Value straddles = both(less(x.lo, zero), lessOrEqual(zero, x.hi));
    return {b.create<arith::SelectOp>(straddles, constant(0), b.create<arith::ExtUIOp>(wide, x.lo)),
            b.create<arith::SelectOp>(straddles, constant(largest),
                                      b.create<arith::ExtUIOp>(wide, x.hi))};
  }

  // |x|, int or float.
  Range absoluteRange(Operation& op) {
    Range x = operand(op, 0);
    if (!x)
      return {};
    Value zero = zeroLike(x.lo);
    auto negated = [&](Value v) {
      return isFloat(v) ? Value(b.create<arith::NegFOp>(v))
                        : Value(b.create<arith::SubIOp>(zero, v));
    };
    Value negLo = negated(x.lo), negHi = negated(x.hi);
    // |x| >= lo when lo >= 0, >= -hi when hi <= 0, else >= 0.
    Value lo =
        b.create<arith::SelectOp>(lessOrEqual(zero, x.lo), x.lo,
                                  b.create<arith::SelectOp>(lessOrEqual(x.hi, zero), negHi, zero));
    Value hi = maximum(negLo, x.hi);
    if (isFloat(x.lo))
      return {lo, hi, x.nan};
    // The least int is its own absolute value (the negation wraps): then anything.
    Value least = signedLimit(x.lo.getType(), false);
    Value wraps = lessOrEqual(x.lo, least);
    return {b.create<arith::SelectOp>(wraps, least, lo),
            b.create<arith::SelectOp>(wraps, signedLimit(x.lo.getType(), true), hi)};
  }

  // The signed remainder.
  Range remainderRange(Operation& op) {
    // |x rem m| < |m|: within [-(M - 1), M - 1] for M the largest |m|, and never negative
    // for x >= 0 (the remainder takes x's sign), so floor division of indices is exact.
    Range x = operand(op, 0), m = operand(op, 1);
    if (!m)
      return {};
    Value zero = zeroLike(m.lo);
    Value largest = maximum(maximum(m.hi, b.create<arith::SubIOp>(zero, m.lo)),
                            b.create<arith::SubIOp>(zero, m.hi));
    Value bound = b.create<arith::SubIOp>(
        largest, b.create<arith::ConstantOp>(b.getIntegerAttr(m.lo.getType(), 1)));
    Value lo = b.create<arith::SubIOp>(zero, bound);
    if (x)
      lo = b.create<arith::SelectOp>(lessOrEqual(zero, x.lo), zero, lo);
    // A divisor range reaching the least int, whose negation wraps: anything.
    Value least = signedLimit(m.lo.getType(), false);
    Value wraps = lessOrEqual(m.lo, least);
    return {b.create<arith::SelectOp>(wraps, least, lo),
            b.create<arith::SelectOp>(wraps, signedLimit(m.lo.getType(), true), bound)};
  }

  // A select: the taken side's range where the condition is fixed, else both.
  Range selectedRange(Operation& op) {
    auto select = cast<arith::SelectOp>(op);
    Truth c = truth(select.getCondition());
    Range x = operand(op, 1), y = operand(op, 2);
    if (!x || !y)
      return {};
    // Only the taken side when the condition is fixed over the domain, else both.
    auto pick = [&](Value onlyX, Value onlyY, Value joined) {
      return b.create<arith::SelectOp>(
          negate(c.canBeFalse), onlyX,
          b.create<arith::SelectOp>(negate(c.canBeTrue), onlyY, joined));
    };
    Value nan =
        isFloat(x.lo) ? pick(mayBeNaN(x), mayBeNaN(y), any(mayBeNaN(x), mayBeNaN(y))) : Value();
    return {pick(x.lo, y.lo, minimum(x.lo, y.lo)), pick(x.hi, y.hi, maximum(x.hi, y.hi)), nan};
  }

  // The least and greatest element of the aux tensor over the box of its indices' ranges,
  // clamped into the tensor as the kernel's reads are: scanned, one flat loop over the box.
  // A box of more than kMaxScan elements gives the element type's whole range.
  Range auxRange(AuxLoadOp load) {
    if (readsPerScore(load))
      return {};
    Value tensor = aux[load.getAux()];
    auto type = cast<MemRefType>(tensor.getType());
    Type element = type.getElementType();
    auto constant = [&](int64_t v) { return b.create<arith::ConstantIndexOp>(v); };
    SmallVector<Value> first, extent;
    Value count = constant(1);
    for (auto [d, i] : llvm::enumerate(load.getIndices())) {
      Range r = range(i);
      if (!r)
        return {};
      Value last = b.create<arith::SubIOp>(b.create<memref::DimOp>(tensor, d), constant(1));
      Value lo = clampIndex(b, r.lo, last);
      Value hi = b.create<arith::MaxSIOp>(clampIndex(b, r.hi, last), lo);
      first.push_back(lo);
      extent.push_back(b.create<arith::AddIOp>(b.create<arith::SubIOp>(hi, lo), constant(1)));
      count = b.create<arith::MulIOp>(count, extent.back());
    }
    const bool floats = isa<FloatType>(element);
    auto extreme = [&](bool greatest) -> Value {
      return floats ? infinity(element, !greatest) : signedLimit(element, greatest);
    };
    Value tooMany = b.create<arith::CmpIOp>(arith::CmpIPredicate::sgt, count, constant(kMaxScan));
    Value scanned = b.create<arith::SelectOp>(tooMany, constant(0), count);
    // Starting from the empty range (greatest below least), widened by every element; a float
    // NaN, which minnumf and maxnumf skip, is noted apart.
    SmallVector<Value, 3> start = {extreme(true), extreme(false)};
    if (floats)
      start.push_back(boolean(false));
    auto loop = b.create<scf::ForOp>(constant(0), scanned, constant(1), start);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      Value rest = loop.getInductionVar();
      SmallVector<Value> at(first.size());
      for (int64_t d = static_cast<int64_t>(first.size()) - 1; d >= 0; --d) {
        at[d] = b.create<arith::AddIOp>(first[d], b.create<arith::RemUIOp>(rest, extent[d]));
        rest = b.create<arith::DivUIOp>(rest, extent[d]);
      }
      Value x = b.create<memref::LoadOp>(tensor, at);
      ValueRange acc = loop.getRegionIterArgs();
      SmallVector<Value, 3> widened = {minimum(acc[0], x), maximum(acc[1], x)};
      if (floats)
        widened.push_back(any(acc[2], isNaN(x)));
      b.create<scf::YieldOp>(widened);
    }
    return {b.create<arith::SelectOp>(tooMany, extreme(false), loop.getResult(0)),
            b.create<arith::SelectOp>(tooMany, extreme(true), loop.getResult(1)),
            floats ? any(tooMany, loop.getResult(2)) : Value()};
  }

  Truth truthOf(Operation& op) {
    if (auto constant = dyn_cast<arith::ConstantIntOp>(&op))
      return truth(constant);
    if (isa<arith::AndIOp, arith::OrIOp, arith::XOrIOp>(op)) {
      Truth x = truth(op.getOperand(0)), y = truth(op.getOperand(1));
      if (isa<arith::AndIOp>(op))
        return {both(x.canBeTrue, y.canBeTrue), any(x.canBeFalse, y.canBeFalse)};
      if (isa<arith::OrIOp>(op))
        return {any(x.canBeTrue, y.canBeTrue), both(x.canBeFalse, y.canBeFalse)};
      return {any(both(x.canBeTrue, y.canBeFalse), both(x.canBeFalse, y.canBeTrue)),
              any(both(x.canBeTrue, y.canBeTrue), both(x.canBeFalse, y.canBeFalse))};
    }
    if (auto select = dyn_cast<arith::SelectOp>(&op)) {
      Truth c = truth(select.getCondition()), x = truth(select.getTrueValue()),
            y = truth(select.getFalseValue());
      return {any(both(c.canBeTrue, x.canBeTrue), both(c.canBeFalse, y.canBeTrue)),
              any(both(c.canBeTrue, x.canBeFalse), both(c.canBeFalse, y.canBeFalse))};
    }
    if (auto compare = dyn_cast<arith::CmpIOp>(&op)) {
      if (compare.getLhs().getType().isInteger(1))
        return either();
      using P = arith::CmpIPredicate;
      switch (compare.getPredicate()) {
      case P::slt: return ordered(compare.getLhs(), compare.getRhs(), true);
      case P::sle: return ordered(compare.getLhs(), compare.getRhs(), false);
      case P::sgt: return ordered(compare.getRhs(), compare.getLhs(), true);
      case P::sge: return ordered(compare.getRhs(), compare.getLhs(), false);
      case P::eq: return equal(compare.getLhs(), compare.getRhs(), false);
      case P::ne: return equal(compare.getLhs(), compare.getRhs(), true);
      default: return either();
      }
    }
    if (auto compare = dyn_cast<arith::CmpFOp>(&op)) {
      // A NaN operand makes an ordered comparison false, and UNE and UNO true.
      using P = arith::CmpFPredicate;
      Value lhs = compare.getLhs(), rhs = compare.getRhs();
      Range x = range(lhs), y = range(rhs);
      if (!x || !y)
        return either();
      Value nan = any(mayBeNaN(x), mayBeNaN(y));
      auto orNaN = [&](Truth t) { return Truth{t.canBeTrue, any(t.canBeFalse, nan)}; };
      switch (compare.getPredicate()) {
      case P::OLT: return orNaN(ordered(lhs, rhs, true));
      case P::OLE: return orNaN(ordered(lhs, rhs, false));
      case P::OGT: return orNaN(ordered(rhs, lhs, true));
      case P::OGE: return orNaN(ordered(rhs, lhs, false));
      case P::OEQ: return orNaN(equal(lhs, rhs, false));
      case P::UNE: {
        Truth t = equal(lhs, rhs, true);
        return {any(t.canBeTrue, nan), t.canBeFalse};
      }
      case P::UNO: return {nan, boolean(true)};
      default: return either();
      }
    }
    return either(); // bits, aux reads
  }

  // x < y (strict) or x <= y: it can hold when x's least is below y's greatest, and fail when
  // x's greatest is at or above y's least.
  Truth ordered(Value lhs, Value rhs, bool strict) {
    Range x = range(lhs), y = range(rhs);
    if (!x || !y)
      return either();
    if (strict)
      return {less(x.lo, y.hi), negate(less(x.hi, y.lo))};
    return {lessOrEqual(x.lo, y.hi), negate(lessOrEqual(x.hi, y.lo))};
  }

  Truth equal(Value lhs, Value rhs, bool notEqual) {
    Range x = range(lhs), y = range(rhs);
    if (!x || !y)
      return either();
    Value overlap = both(lessOrEqual(x.lo, y.hi), lessOrEqual(y.lo, x.hi));
    // Both ranges one and the same point: never unequal.
    Value onePoint = both(both(negate(less(x.lo, x.hi)), negate(less(y.lo, y.hi))),
                          both(lessOrEqual(x.lo, y.lo), lessOrEqual(y.lo, x.lo)));
    Value canDiffer = negate(onePoint);
    return notEqual ? Truth{canDiffer, overlap} : Truth{overlap, canDiffer};
  }

  ImplicitLocOpBuilder& b;
  ValueRange aux; // the update's aux tensors
  llvm::DenseMap<Value, Range> ranges;
  llvm::DenseMap<Value, Truth> truths;
};

} // namespace

MaskBounds maskBounds(ImplicitLocOpBuilder& b, Region& mask, ValueRange aux,
                      const DomainCorners& corners) {
  const Truth truth = Bounds(b, aux).maskOf(mask.front(), corners);
  return {truth.canBeTrue, truth.canBeFalse};
}

} // namespace attnc::attn
