// The Halide algorithm of linear attention (variant=linear): o_i = phi(q_i)^T S_i / phi(q_i)^T z_i
// with S_i = sum_{j seen by i} phi(k_j) v_j^T and z_i = sum_{j seen by i} phi(k_j), never forming
// the Tq x Tk matrix. phi is elu(x)+1, relu(x), or FAVOR+'s positive random features
// exp(w_f . x' - |x'|^2 / 2) / sqrt(m) of x' = sqrt(scale) x.
//
// z rides along S as one more value column (v extended by a 1), so one product gives both the
// numerator and the denominator.
//
// Non-causal, every row sees the same keys (the first `valid` of its batch entry):
//   S = sum_{j < valid} phi(k_j) [v_j, 1]^T, one product over the keys per kv head.
// Causal, row i sees the first seen(i) = clamp(i + offset + 1, 0, valid) keys. Rows come in
// chunks of C; chunk c starts at p_c = seen(cC) keys, and every row of the chunk sees at most
// C - 1 keys past p_c. So with the chunk sums D_c = sum_{p_c <= j < p_{c+1}} phi(k_j) [v_j, 1]^T
// and their exclusive prefix P_c = sum_{j < p_0} + sum_{c' < c} D_c' (a scan over chunks; p_0 > 0
// when bottom-right alignment puts the first row past key 0),
//   numerator_i = phi(q_i)^T P_c + sum_{jj < C, p_c + jj < seen(i)} (phi(q_i) . phi(k_{p_c+jj}))
//   [v, 1]_{p_c+jj}
// which is the chunked prefix-sum form of causal linear attention: O(T C m + T m d) work.
#ifndef ATTNC_COMPILER_BACKENDS_HALIDE_LINEARALGORITHM_H
#define ATTNC_COMPILER_BACKENDS_HALIDE_LINEARALGORITHM_H

#include "Backends/Halide/ScoreTerms.h"
#include "Backends/Halide/VariantOperands.h"
#include "Spec/Spec.h"
#include "halide/Stages.h"

#include <Halide.h>
#include <memory>
#include <vector>

namespace attnc::halide {

struct LinearAlgorithm : LinearStages {
  std::shared_ptr<ScoreTerms> terms; // inputs in manifest order (q, k, v, lengths, omega)
  std::vector<Halide::Func> outputs; // o, then weights when asked
};

// Builds linear attention for `spec` with causal chunks of `chunk` rows.
LinearAlgorithm buildLinearAttention(const Spec& spec, int chunk);

} // namespace attnc::halide

#endif // ATTNC_COMPILER_BACKENDS_HALIDE_LINEARALGORITHM_H
