// An expression (a spec's score_mod or mask_mod, or a built-in's: Spec/BuiltinExpressions.h)
// as the body of an attn op's expression region (AttnOps.td): scalar arith and math ops over the
// block's arguments (score: f32, b, h, g, q_idx, kv_idx, qpos, Tq, Tk: i32), yielding
// (gpu.yield) f32 for a number and i1 for a mask. Ints are 32 bits, as in every kernel
// (docs/spec.md leaves overflow unspecified); params become constants and aux reads
// attn.aux_load of the op's aux operands (an i8 element, a u8 input such as block_layout, is
// zero-extended to an int; an f16 or bf16 one, the bias in a spec's dtype, widened to f32).
// Several expressions make one region applied in order, each reading as `score` what the one
// before gave (the built-in modifiers, then a spec's score_mod). The lowerings apply the region
// to vectors of scores (dialects/attn/Transforms/ScoreTerms.cpp).
#ifndef ATTNC_COMPILER_BACKENDS_MLIR_EXPRTOMLIR_H
#define ATTNC_COMPILER_BACKENDS_MLIR_EXPRTOMLIR_H

#include "Expr/Expr.h"
#include "Spec/Spec.h"
#include "mlir/IR/Region.h"

#include <span>
#include <string>
#include <vector>

namespace attnc::mlirbackend {

// An aux operand of the op: the name expressions read it by, and its element type.
struct AuxOperand {
  std::string name;
  mlir::Type element;
};

void buildExpressionRegion(mlir::Region& region, std::span<const expr::Node* const> trees,
                           const Spec& spec, std::span<const AuxOperand> aux);
void buildExpressionRegion(mlir::Region& region, const expr::Node& tree, const Spec& spec,
                           std::span<const AuxOperand> aux);
// The derivative of the trees applied in order (buildExpressionRegion's score) by the score
// they start from, by the chain rule over ExprDerive's derivativeByScore of each: attn.backward's
// score_grad.
void buildScoreGradientRegion(mlir::Region& region, std::span<const expr::Node* const> trees,
                              const Spec& spec, std::span<const AuxOperand> aux);

// attn.backward's aux_grad: for each read of a tensor named in `learned` by the trees applied
// in order, its indices and d (the trees' result) / d (the element read), by ExprDerive's
// derivativesByAux and the chain rule through the later trees. Returns each read's index in
// `learned` (the op's aux_grad_targets); reads of other tensors are left out.
std::vector<int64_t> buildAuxGradientRegion(mlir::Region& region,
                                            std::span<const expr::Node* const> trees,
                                            const Spec& spec, std::span<const AuxOperand> aux,
                                            std::span<const std::string> learned);

} // namespace attnc::mlirbackend

#endif // ATTNC_COMPILER_BACKENDS_MLIR_EXPRTOMLIR_H
