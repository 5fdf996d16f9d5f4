//===- AttnOps.h - attn dialect operations -----------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_IR_ATTNOPS_H
#define ATTNC_DIALECTS_ATTN_IR_ATTNOPS_H

#include "attn/IR/AttnDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

// clang-format off
#include "attn/IR/AttnInterfaces.h.inc"
#define GET_OP_CLASSES
#include "attn/IR/AttnOps.h.inc"
// clang-format on

namespace attnc::attn {

// Two extents that must agree where both are static (MLIR's verifyCompatibleDims), as the
// verifiers of the ops on buffers compare their operands' shapes.
inline bool extentsDisagree(int64_t a, int64_t b) {
  return mlir::failed(mlir::verifyCompatibleDims({a, b}));
}

// RoPE's attributes, on attn.attention and attn.rope: the style names a pairing, theta is
// positive, and the rotated dims are an even count within the head dim.
mlir::LogicalResult verifyRope(mlir::Operation* op, llvm::StringRef style, double theta,
                               int64_t dims, int64_t headDim);

// A quantized KV cache's element type: int8 (i8) or OCP FP8 E4M3 (f8E4M3FN), each read as a
// number times its row's scale.
inline bool isQuantizedCacheElement(mlir::Type element) {
  return element.isInteger(8) || mlir::isa<mlir::Float8E4M3FNType>(element);
}
// An 8-bit float other than E4M3FN, which no lowering decodes.
inline bool isOtherFloat8(mlir::Type element) {
  return mlir::isa<mlir::FloatType>(element) && element.getIntOrFloatBitWidth() == 8 &&
         !mlir::isa<mlir::Float8E4M3FNType>(element);
}

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_IR_ATTNOPS_H
