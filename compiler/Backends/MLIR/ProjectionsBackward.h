// mha's backward around attn.backward. The kernel takes mha's inputs x_q, x_k, x_v and its
// output Y = Concat(heads) W_O, so it recomputes what the heads' backward reads, and takes the
// projections back after it (docs/spec.md, "Backward"):
//
//   Q, K, V = (x + PE) W_Q, W_K, W_V    VariantOperands' projections, as the forward's
//   O_a = attention(Q, K, V)            attn.attention again: O(T) memory, as P is recomputed
//                                       (both read from the forward's q_proj, k_proj, v_proj
//                                       and o_heads instead under save_projections)
//   dO_a = dY W_O^T,  dW_O = O_a^T dY
//   dQ, dK, dV                          attn.backward, into f32 rows [B, T, H d]
//   dx_q = dQ W_Q^T,  dW_Q = (x_q + PE)^T dQ, and so for k and v
//
// Each weight's gradient is one ordered sum over (b, t) per element (attn.matmul's batch_sum),
// so it is the same at any thread count.
#ifndef ATTNC_COMPILER_BACKENDS_MLIR_PROJECTIONSBACKWARD_H
#define ATTNC_COMPILER_BACKENDS_MLIR_PROJECTIONSBACKWARD_H

#include "Backends/MLIR/VariantOperands.h"

namespace attnc::mlirbackend {

class ProjectionsBackward {
public:
  // Emits the projections, the attention's output recomputed (or views of the saved ones),
  // dO_a and dW_O at b's point, from
  // the backward kernel's arguments by name. The projections are in `element` (the forward's
  // workspace type), the heads' gradients in f32.
  ProjectionsBackward(mlir::ImplicitLocOpBuilder& b, const Spec& spec,
                      const std::map<std::string, mlir::Value>& byName, DType element);

  // What attn.backward reads and writes in place of the kernel's q, k, v, o, grad_o, grad_q,
  // grad_k and grad_v: the heads [B, H(_kv), T, d] and their gradients.
  struct Heads {
    mlir::Value q, k, v, o, gradO, gradQ, gradK, gradV;
  };
  const Heads& heads() const { return headViews; }

  // Emits dx and dW for q, k and v after attn.backward, then frees the workspace.
  void finish(mlir::ImplicitLocOpBuilder& b) const;

private:
  // A workspace [B, T, width] of `element`, T the input's positions, allocated before the
  // kernel's first phase.
  static mlir::Value rows(mlir::ImplicitLocOpBuilder& b, mlir::Value input, int64_t width,
                          mlir::Type element);
  // grad_<weight> = (x + PE)^T dRows, summed over every batch entry and position.
  void weightGradient(mlir::ImplicitLocOpBuilder& b, mlir::Value x, mlir::Value dRows,
                      const std::string& weight, mlir::Value offset) const;
  // into = dRows W^T: the gradient of `x` in x W.
  void inputGradient(mlir::ImplicitLocOpBuilder& b, mlir::Value dRows, const std::string& weight,
                     mlir::Value into) const;

  const std::map<std::string, mlir::Value>& byName;
  VariantOperands projections;
  mlir::Value outputGradient;                            // dO_a [B, Tq, H d_v]
  mlir::Value queryGradient, keyGradient, valueGradient; // dQ, dK, dV [B, T, H(_kv) d]
  Heads headViews;
};

} // namespace attnc::mlirbackend

#endif // ATTNC_COMPILER_BACKENDS_MLIR_PROJECTIONSBACKWARD_H
