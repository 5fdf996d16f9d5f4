// Comparing a kernel's outputs with the f64 reference's.
#ifndef ATTNC_TOOLS_ATTNC_COMPARE_H
#define ATTNC_TOOLS_ATTNC_COMPARE_H

#include "Spec/Spec.h"

#include <cstdint>
#include <string>
#include <vector>

namespace attnc::tools {

struct Tolerance {
  double absolute, relative; // |got - want| <= absolute + relative * |want|
};

// f32 kernels: 1e-5; f16/bf16 storage (inputs identical, outputs rounded, f32 accumulation):
// 2e-2; each for reductions of up to 1024 terms. Longer ones (d_k, d_model, Tk) accumulate
// f32 rounding error that grows as the square root of their length, and so does the tolerance.
// Infinities and NaNs must match exactly, position by position.
Tolerance toleranceFor(DType dtype, int64_t reductionLength);

// The longest sum behind an output: the query-key products (d_k, d_q, additive's d_attn),
// mha's projections (d_model) and the sums over keys (Tk; linformer's projections of Tk keys
// bound its sums over proj_len keys).
int64_t reductionLength(const Spec& spec, int64_t seqK);

// The longest sum behind a gradient of the backward entry (grad_<argument>): dq sums over keys,
// dk and dv over a GQA group's query rows, and every other argument's over all the scores that
// read it; at least the forward's.
int64_t gradientReductionLength(const Spec& spec, const std::string& argument, int64_t batch,
                                int64_t seqQ, int64_t seqK);

struct Comparison {
  double maxAbsError = 0;
  // The largest |got - want| / (absolute + relative · |want|): the share of its own tolerance the
  // worst element takes, past 1 exactly where an element fails. (max |got - want| / max |want|
  // stays small beside a failing element when |want| spans a wide range.)
  double worstShare = 0;
  int64_t failures = 0; // elements outside the tolerance
  int64_t firstFailure = -1;
};

Comparison compare(const std::vector<double>& got, const std::vector<double>& want,
                   Tolerance tolerance);

} // namespace attnc::tools

#endif // ATTNC_TOOLS_ATTNC_COMPARE_H
