// What an expression can be over a box of points: interval arithmetic on the tree, sound (the
// true value at every point of the box lies within the bounds) but not always tight, since the
// variables are taken as independent. For a mask, which of true and false it can be over the
// box. The spec's index check (ExprIndexCheck.h) takes from it the constant bounds its affine
// rules miss; code generators bound tiles with their own arithmetic on run-time values
// (Backends/Halide/ExprTileBounds.h), the same rules over symbolic corners.
#ifndef ATTNC_COMPILER_EXPR_EXPRBOUNDS_H
#define ATTNC_COMPILER_EXPR_EXPRBOUNDS_H

#include "Expr/Expr.h"

#include <cstdint>
#include <limits>
#include <map>
#include <string>

namespace attnc::expr {

// An int or float range, both ends included (an infinite end: unbounded), or for a bool which of
// true and false it can be. The bounds hold for the reference (ints in 64 bits, floats in f64)
// and for kernels (ints in 32 bits, floats in f32) alike. Finite int ends lie within 32 bits, so
// each is an exact double; an int +, -, *, negation, abs or // that may leave 32 bits, which
// kernels wrap, is unbounded on both sides, and a floor past 32 bits saturates differently in
// the two. Float ranges are widened by 2^-20 of their size at every step, which covers f32's
// rounding, and further where f32 takes a value to ±inf (past its largest) or to 0 (below its
// smallest normal); they say whether the value may be NaN (a NaN compares false, so a
// comparison of it can be either).
struct Bounds {
  Type type;
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool canBeTrue = true, canBeFalse = true;
  bool maybeNaN = false;

  static Bounds ofInt(int64_t lo, int64_t hi);
  static Bounds ofFloat(double lo, double hi);
  static Bounds ofBool(bool canBeTrue, bool canBeFalse);
  static Bounds unknown(Type type);
};

// The ranges of the variables over a box: a query tile, a key block, the heads and batch
// entries, the sequence lengths; params with their values. Names left out are unbounded.
struct Box {
  std::map<std::string, Bounds> variables; // b, h, g, q_idx, kv_idx, qpos, Tq, Tk, score
  std::map<std::string, Bounds> params;
};

Bounds bounds(const Node& node, const Box& box);

} // namespace attnc::expr

#endif // ATTNC_COMPILER_EXPR_EXPRBOUNDS_H
