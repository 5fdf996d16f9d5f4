// Per-head queries, keys and values, after the variant's input transforms.
#ifndef ATTNC_COMPILER_REFERENCE_HEADINPUTS_H
#define ATTNC_COMPILER_REFERENCE_HEADINPUTS_H

#include "Reference/Reference.h"

#include <string_view>

namespace attnc {

struct HeadInputs {
  Array4 q; // [B, H, Tq, d_q]
  Array4 k; // [B, H_kv, keys, d_k]; keys = Tk, or proj_len for linformer
  Array4 v; // [B, H_kv, keys, d_v]
};

// sdpa / additive / bilinear / linear: the inputs as they are, RoPE applied when asked.
// mha: positional encoding on the inputs, then Q = x_q W_Q, K = x_k W_K, V = x_v W_V split
// into heads, then RoPE, with the projections before RoPE also in *projections where given
// (save_projections' tensors). linformer: K~ = E K and V~ = F V over the valid keys.
HeadInputs prepareHeadInputs(const KernelTensors& tensors, const ParallelFor& parallelFor,
                             HeadInputs* projections = nullptr);

// Row t of batch b rotated by RoPE at position t + offsets[b]; `transposed`: by R(pos)^T =
// R(-pos), which takes a rotated row's gradient back (R is orthogonal).
void applyRopeToAll(Array4& x, const std::vector<int64_t>& offsets, const Spec& spec,
                    bool transposed = false);

// [B, heads, T, d] as [B, T, heads d], the heads side by side: mha's projections' and
// Concat(head_1..head_H)'s layout.
std::vector<double> headsSideBySide(const Array4& x);

// mha's input x_q, x_k or x_v ("q", "k", "v") [B, T, d_model] as its projection reads it: with
// the sinusoidal encoding added where the spec asks.
std::vector<double> mhaInput(const KernelTensors& tensors, std::string_view name);

// Valid keys per batch: Tk, or lengths[b] clamped to [0, Tk] under a padding mask.
std::vector<int64_t> keyLengths(const KernelTensors& tensors);

} // namespace attnc

#endif // ATTNC_COMPILER_REFERENCE_HEADINPUTS_H
