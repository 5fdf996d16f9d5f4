// The f64 reference: every variant, mask, modifier and output of the spec, computed directly
// from the definitions in the literature. It is the oracle every backend is judged by, and the
// kernel of the `reference` backend's bundles.
#ifndef ATTNC_COMPILER_REFERENCE_REFERENCE_H
#define ATTNC_COMPILER_REFERENCE_REFERENCE_H

#include "Reference/KernelTensors.h"

#include <functional>

namespace attnc {

// Runs body(i) for i in [0, count); the bodies write disjoint data.
using ParallelFor = std::function<void(int64_t count, const std::function<void(int64_t)>& body)>;
ParallelFor serialFor();

// Reads the inputs of `tensors` and writes its outputs (o, and lse / weights when the spec asks).
//
// Semantics, per query head h (kv head g = h / (heads / kv_heads)) and row i:
//   s_ij = modifiers(scale * score(q_i, k_j))  for each key j the masks keep
//   lse_i = log sum_j exp(s_ij),  p_ij = exp(s_ij - lse_i),  o_i = sum_j drop_ij p_ij v_j
// where drop_ij is keep_ij / (1 - dropout) and the modifiers are, in order, softcap
// (cap * tanh(s / cap)), ALiBi and the bias tensor. A row with no key left has o_i = 0,
// lse_i = -inf and weights 0. Linear attention replaces the softmax by feature maps
// (LinearAttention.cpp); mha and linformer project before and after (HeadInputs.cpp).
void runReference(const KernelTensors& tensors, const ParallelFor& parallelFor);

// The backward entry's f64 reference (docs/spec.md, "Backward"): reads the inputs of
// backwardArguments(spec) and writes every gradient, exact up to f64 rounding. It recomputes the
// forward from the inputs and reads neither o nor lse: the oracle's gradients are those of its
// own forward, not of a kernel's rounded one.
void runReferenceBackward(const KernelTensors& tensors, const ParallelFor& parallelFor);

} // namespace attnc

#endif // ATTNC_COMPILER_REFERENCE_REFERENCE_H
