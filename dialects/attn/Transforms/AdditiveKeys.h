//===- AdditiveKeys.h - the exponentials of Bahdanau's hidden key rows ---------===//
//
// The additive score sums w_c tanh(a_c + b_c) over the hidden dims c, a_c of a query row and
// b_c of a key. With E(x) = e^(2x),
//
//   tanh(a + b) = 1 - 2 / (E(a) E(b) + 1)
//
// a product, a reciprocal and an FMA per element instead of an exponential, once E is formed
// per query tile and per key. Wherever |a|, |b| <= kHiddenBound it is as accurate as tanh's own
// approximation in absolute terms (about f32's epsilon): E is then a normal f32 from e^-80 to
// e^80, and E(a) E(b) overflows or underflows only where |a + b| > 43, where tanh is +-1 in f32.
// The update (UpdateAdditive.cpp, on CPUs and CUDA's SIMT path) takes tanh itself in a block whose
// rows or keys pass the bound, or whose weights pass kWeightBound (-2 w would overflow).
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMS_ADDITIVEKEYS_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMS_ADDITIVEKEYS_H

#include "attn/IR/AttnOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"

namespace attnc::attn {

inline constexpr double kHiddenBound = 40.0;
inline constexpr double kWeightBound = 1e37;

// E(clamp(x, -kHiddenBound, kHiddenBound)) of a vector x.
mlir::Value boundedExponential(mlir::ImplicitLocOpBuilder& b, mlir::Value x);

// A workspace buffer [B, H, d + 1, Tk'] f32, Tk' = Tk rounded up to `lanes`, of the update's
// hidden keys k [B, H, Tk, d]: row c < d of head h holds E(clamp(k[b, h, j, c])) for each key j,
// row d the key's max_c |k[b, h, j, c]| (NaN where an element is NaN), both with keys in vector
// lanes. Filled by a phase before the one running `op`, one task per (batch entry, head, `lanes`
// keys); allocated before the kernel's first phase and freed at its end.
mlir::Value layOutAdditiveKeys(mlir::RewriterBase& rewriter, OnlineUpdateOp op, int64_t lanes);

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_ADDITIVEKEYS_H
