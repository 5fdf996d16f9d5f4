//===- Elements.h - elements of any storage type as f32 -------------------===//
//
// Loads and stores of f32, bf16, f16, int8 and fp8 E4M3 buffers through f32, the type every
// kernel computes in.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_KIT_ELEMENTS_H
#define ATTNC_DIALECTS_ATTN_KIT_ELEMENTS_H

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace attnc::attn {

// An element, scalar or vector, of a buffer the lowerings read as f32: f32 as it is, bf16/f16
// extended, an int8 cache's as its signed value, an fp8 E4M3 cache's (f8E4M3FN) decoded from its
// bits through binary16 (LLVM 19 lowers no f8 conversion; the value is attnc/Float8.hpp's).
mlir::Value toF32(mlir::ImplicitLocOpBuilder& b, mlir::Value element);
// toF32 up to a constant factor, for a caller that folds that factor into a scale it applies
// anyway (scaleForUnscaled): an fp8 E4M3 element comes out as 2^-8 its value, one product per
// element fewer; every other type as toF32 gives it.
mlir::Value toF32Unscaled(mlir::ImplicitLocOpBuilder& b, mlir::Value element);
// A quantized row's `scale` (a scalar or vector of f32) times the factor toF32Unscaled leaves
// out of the row's `codes` type (256 for fp8 E4M3; the scale itself for every other type).
mlir::Value scaleForUnscaled(mlir::ImplicitLocOpBuilder& b, mlir::Value scale, mlir::Type codes);
// Loads an element of a buffer as f32 (toF32).
mlir::Value loadF32(mlir::ImplicitLocOpBuilder& b, mlir::Value buffer, mlir::ValueRange indices);
// Stores an f32 into a float buffer of any float type (rounding to nearest even).
void storeF32(mlir::ImplicitLocOpBuilder& b, mlir::Value value, mlir::Value buffer,
              mlir::ValueRange indices);

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_KIT_ELEMENTS_H
