// Aux tensor reads proved in bounds for every batch size and sequence length, when the spec is
// parsed: kernels then read an aux tensor without a run-time check, and a spec whose index the
// compiler cannot prove is refused with the clamp that would fix it.
//
// The proof bounds each index between affine functions of the run-time sizes B, Tq and Tk
// (h, g, params and literals are constants), in exact integer arithmetic. A node may have several
// such bounds, each sound: min(a, b) is below every upper bound of a and of b, so
// `clamp(x, 0, Tk - 1)` is below Tk - 1 whatever x is. A sum of ints keeps its exact value as a
// linear form of the variables besides, so `kv_idx - kv_idx` is 0. An index is in bounds when
// some lower bound is at least 0 and some upper bound at most the dimension minus 1, for all
// B, Tq, Tk in [1, 2^31 - 1] taken independently (so an index that needs Tq <= Tk is refused:
// declare the tensor over Tq, or clamp).
//
// Kernels compute ints in 32 bits and the reference in 64, so a bound holds for both only where
// no step wraps: an int +, -, *, negation, abs or // whose value may leave 32 bits (kv_idx * 2 at
// Tk = 2^31 - 1) gives no bound; clamp, min, max and % bound their results whatever their
// operands did. Floats (f32 in kernels, f64 in the reference) give only the constant bounds of
// ExprBounds.h, which allow for f32's rounding and range, so `floor(kv_idx * 1.0)` proves nothing
// (f32 rounds kv_idx = 2^24 + 3 up to 2^24 + 4).
#ifndef ATTNC_COMPILER_EXPR_EXPRINDEXCHECK_H
#define ATTNC_COMPILER_EXPR_EXPRINDEXCHECK_H

#include "Expr/ExprEval.h"

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace attnc::expr {

// constant + batch * B + seqQ * Tq + seqK * Tk: an aux tensor's dimension.
struct Affine {
  int64_t constant = 0, batch = 0, seqQ = 0, seqK = 0;
};

struct IndexFacts {
  int64_t heads = 1, kvHeads = 1;
  bool bottomRight = true; // qpos = q_idx + Tk - Tq; else qpos = q_idx
  std::map<std::string, Value> params;
  std::map<std::string, std::vector<Affine>> auxShapes; // each aux tensor's dims
};

// Throws ExprError (naming the key, text, the index's column, the tensor, the bound it could
// not prove and a clamp that satisfies it) for the first aux index not proved in bounds.
void checkAuxIndices(std::string_view key, std::string_view text, const Node& root,
                     const IndexFacts& facts);

} // namespace attnc::expr

#endif // ATTNC_COMPILER_EXPR_EXPRINDEXCHECK_H
