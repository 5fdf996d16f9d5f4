// The two attention cores of the reference, over prepared per-head inputs.
#ifndef ATTNC_COMPILER_REFERENCE_ATTENTION_H
#define ATTNC_COMPILER_REFERENCE_ATTENTION_H

#include "Reference/HeadInputs.h"

namespace attnc {

struct AttentionResult {
  Array4 o;                    // [B, H, Tq, d_v]
  std::vector<double> lse;     // [B, H, Tq], when the spec asks
  std::vector<double> weights; // [B, H, Tq, keys], when the spec asks
};

// Softmax over masked, modified scores (sdpa, mha, additive, bilinear, linformer).
AttentionResult softmaxAttention(const KernelTensors& tensors, const HeadInputs& in,
                                 const ParallelFor& parallelFor);

// Linear attention with a feature map phi (Katharopoulos et al. 2020; Performer):
//   o_i = phi(q_i)^T S_i / phi(q_i)^T z_i,  S_i = sum_j phi(k_j) v_j^T,  z_i = sum_j phi(k_j)
// over the keys the masks keep; causal rows use prefix sums over j <= qpos. A zero
// denominator (no key, or relu features all zero) gives o_i = 0.
AttentionResult linearAttention(const KernelTensors& tensors, const HeadInputs& in,
                                const ParallelFor& parallelFor);

} // namespace attnc

#endif // ATTNC_COMPILER_REFERENCE_ATTENTION_H
