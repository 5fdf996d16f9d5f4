// What each softmax variant feeds the online softmax (AttentionAlgorithm.h), as Halide Funcs:
// the query and key operands in the space the score combines them in, and the values.
//
//   sdpa       q . k                          operands q, k (RoPE'd when asked)
//   bilinear   (q^T W) . k                    W applied to the query tile inside the task
//   additive   v_a . tanh(W1 q + W2 k)        W1 q per query tile, W2 k once per call
//   linformer  q . (E K)_p over p < proj_len  E K and F V once per call
//   mha        (x_q W_Q) . (x_k W_K)          x_q W_Q per query tile, K and V once per call
//
// The products computed once per call (and bilinear's, additive's and mha's query products,
// computed per query tile) are GEMM-shaped Projections, which the schedule tiles in registers.
#ifndef ATTNC_COMPILER_BACKENDS_HALIDE_VARIANTOPERANDS_H
#define ATTNC_COMPILER_BACKENDS_HALIDE_VARIANTOPERANDS_H

#include "Backends/Halide/ScoreTerms.h"
#include "Spec/Spec.h"
#include "halide/Stages.h"

#include <Halide.h>
#include <functional>
#include <string>
#include <vector>

namespace attnc::halide {

// acc(e, t, x, b) = sum over r < extent of term(e, t, x, b, r).
Projection makeProjection(const std::string& name, Halide::Expr extent,
                          const std::function<Halide::Expr(Halide::Expr, Halide::Expr, Halide::Expr,
                                                           Halide::Expr, Halide::Expr)>& term);

struct VariantOperands {
  int scoreDim = 0;       // the length the score reduces over: d_k, or d_attn for additive
  bool additive = false;  // the score is v_a . tanh(query + key), not query . key
  Halide::Func queryIn;   // (e, i, h, b): the query operand of row i, unscaled
  Halide::Func keyIn;     // (e, j, h, b): the key operand of attended key j, for query head h
  Halide::Func valueIn;   // (e, j, h, b): the value of attended key j
  Halide::Func scoreWeight; // additive: (e, h) scale * v_a
  // GEMM-shaped products: those computed once per call, and those per query tile.
  std::vector<Projection> perCall, perQueryTile;
  // Small tables computed once per call (transposed weights, sinusoidal encodings).
  std::vector<Halide::Func> tables;
  // (d, t, g, b): keys rotated by RoPE once per call; only with RoPE.
  Halide::Func rotatedKeys;
};

// The operands of `spec`'s variant (not linear, whose algorithm is LinearAlgorithm.h).
VariantOperands defineOperands(const Spec& spec, const ScoreTerms& terms);

} // namespace attnc::halide

#endif // ATTNC_COMPILER_BACKENDS_HALIDE_VARIANTOPERANDS_H
