// The buffers attn.attention reads and writes for each variant (docs/spec.md, "Semantics"):
// the kernel's own for sdpa; for mha, additive, bilinear and Linformer workspace buffers that
// attn.matmul products fill before the attention (mha's Q, K, V projections, additive's W1 q and
// W2 k, bilinear's q W, Linformer's E K and F V), and for mha one that W_O reads after it.
#ifndef ATTNC_COMPILER_BACKENDS_MLIR_VARIANTOPERANDS_H
#define ATTNC_COMPILER_BACKENDS_MLIR_VARIANTOPERANDS_H

#include "Spec/Spec.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <map>
#include <string>

namespace attnc::mlirbackend {

class VariantOperands {
public:
  // Whether the products run (the forward, and a backward that recomputes them) or their
  // results are the forward's saved ones (a backward under save_projections, which reads mha's
  // q_proj, k_proj, v_proj and o_heads arguments).
  enum class Products { Emit, Saved };

  // Emits the workspace and the products that make the attention's inputs at b's point, from
  // the kernel's arguments by name (each viewed heads first where it has heads).
  // The workspace holds `element` (f32, or on GPUs the f16 or bf16 that tensor cores take).
  // Under save_projections, mha's projections and the heads' output are the arguments
  // q_proj, k_proj, v_proj and o_heads instead of workspace.
  VariantOperands(mlir::ImplicitLocOpBuilder& b, const Spec& spec,
                  const std::map<std::string, mlir::Value>& arguments, DType element,
                  Products products = Products::Emit);

  // The attention's query, keys and values [B, H(_kv), T, d] and output [B, H, Tq, d_v]
  // (for a paged cache, its pages).
  mlir::Value query() const { return q; }
  mlir::Value keys() const { return k; }
  mlir::Value values() const { return v; }
  mlir::Value output() const { return o; }
  // Additive's score weights v_a as [H_kv, H / H_kv, d_attn] (null for the other variants).
  mlir::Value scoreWeights() const { return additiveWeights; }

  // mha's inputs' positions under pe=sinusoidal, the projections' sinusoid offsets (null
  // without): Tk - Tq for the query under bottom_right alignment, else 0.
  mlir::Value queryPositionOffset() const { return queryOffset; }
  mlir::Value keyPositionOffset() const { return keyOffset; }
  // mha's attention output [B, Tq, H d_v], heads side by side (W_O's input).
  mlir::Value concatenatedOutput() const { return concatenatedHeads; }

  // Emits what follows the attention at b's point: mha's W_O, then the workspace's release.
  void finish(mlir::ImplicitLocOpBuilder& b) const;
  // The workspace's release alone (the backward, which takes W_O back itself).
  void release(mlir::ImplicitLocOpBuilder& b) const;

private:
  // A buffer of the attention's operand type, freed by finish.
  mlir::Value workspace(mlir::ImplicitLocOpBuilder& b, llvm::ArrayRef<int64_t> shape,
                        mlir::ValueRange dynamicSizes);
  void projectMha(mlir::ImplicitLocOpBuilder& b, Products products);
  // mha's rows [B, T, width]: the saved argument `saved` under save_projections, else workspace.
  mlir::Value mhaRows(mlir::ImplicitLocOpBuilder& b, const char* saved, int64_t width,
                      mlir::Value batch, mlir::Value seq);
  void projectBilinear(mlir::ImplicitLocOpBuilder& b);
  void projectAdditive(mlir::ImplicitLocOpBuilder& b);
  void projectLinformer(mlir::ImplicitLocOpBuilder& b);

  const Spec& spec;
  const std::map<std::string, mlir::Value>& arguments;
  const mlir::Type workspaceElement;
  mlir::Value q, k, v, o;
  mlir::Value additiveWeights;   // v_a grouped by KV head
  mlir::Value concatenatedHeads; // mha: the attention's output [B, Tq, H d_v], W_O's input
  mlir::Value queryOffset, keyOffset;
  llvm::SmallVector<mlir::Value> buffers;
};

} // namespace attnc::mlirbackend

#endif // ATTNC_COMPILER_BACKENDS_MLIR_VARIANTOPERANDS_H
