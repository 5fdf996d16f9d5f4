// The two attention cores of the reference, over prepared per-head inputs.
#ifndef ATTNC_COMPILER_REFERENCE_ATTENTION_H
#define ATTNC_COMPILER_REFERENCE_ATTENTION_H

#include "Reference/HeadInputs.h"

#include <map>
#include <string>

namespace attnc {

struct AttentionResult {
  Array4 o;                    // [B, H, Tq, d_v]
  std::vector<double> lse;     // [B, H, Tq], when the spec asks
  std::vector<double> weights; // [B, H, Tq, keys], when the spec asks
};

// The gradients of the loss by the attention's inputs.
struct AttentionGradients {
  Array4 q, k, v; // shaped as HeadInputs' q, k, v
  // By argument name, dense as the argument: the variant's weights, sinks, bias and the float
  // aux tensors the score reads.
  std::map<std::string, std::vector<double>> arguments;

  // Adds one (b, h)'s share: its q rows [Tq, d_q], and its KV head g's keys' and values'
  // gradients [keys, d], which GQA sums over the group. Called in a fixed order, so the sums
  // are the same on any number of threads.
  void addHead(int64_t b, int64_t h, int64_t g, const std::vector<double>& query,
               const std::vector<double>& key, const std::vector<double>& value);
};

// Each head's sink logit: the spec's sinks, or -inf without.
std::vector<double> sinkLogits(const KernelTensors& tensors);

// Softmax over masked, modified scores (sdpa, mha, additive, bilinear, linformer).
AttentionResult softmaxAttention(const KernelTensors& tensors, const HeadInputs& in,
                                 const ParallelFor& parallelFor);

// The gradients of softmaxAttention given dL/do [B, H, Tq, d_v], recomputed from the inputs.
AttentionGradients softmaxAttentionBackward(const KernelTensors& tensors, const HeadInputs& in,
                                            const Array4& outputGradient,
                                            const ParallelFor& parallelFor);

// Linear attention with a feature map phi (Katharopoulos et al. 2020; Performer):
//   o_i = phi(q_i)^T S_i / phi(q_i)^T z_i,  S_i = sum_j phi(k_j) v_j^T,  z_i = sum_j phi(k_j)
// over the keys the masks keep; causal rows use prefix sums over j <= qpos. A zero
// denominator (no key, or relu features all zero) gives o_i = 0.
AttentionResult linearAttention(const KernelTensors& tensors, const HeadInputs& in,
                                const ParallelFor& parallelFor);

// The gradients of linearAttention given dL/do [B, H, Tq, d_v], recomputed from the inputs
// (omega, drawn from the seed, is not learned).
AttentionGradients linearAttentionBackward(const KernelTensors& tensors, const HeadInputs& in,
                                           const Array4& outputGradient,
                                           const ParallelFor& parallelFor);

} // namespace attnc

#endif // ATTNC_COMPILER_REFERENCE_ATTENTION_H
