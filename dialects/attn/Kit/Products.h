//===- Products.h - the ways of multiplying -------------------------------===//
//
// The products the CPU kernels are built from: FMAs on widened f32 values (a register tile's
// rank-1 update) and AVX512-BF16's pair products (vdpbf16ps) with the bf16 pairs they read.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_KIT_PRODUCTS_H
#define ATTNC_DIALECTS_ATTN_KIT_PRODUCTS_H

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace attnc::attn {

// A register tile's rank-1 update: acc[s * R + r] += rowVectors[r] * scalars[s] for the R
// vectors of query rows and each scalar (a key's or a value's element).
llvm::SmallVector<mlir::Value> rankOneUpdate(mlir::ImplicitLocOpBuilder& b,
                                             mlir::ArrayRef<mlir::Value> rowVectors,
                                             mlir::ArrayRef<mlir::Value> scalars,
                                             mlir::ValueRange acc);

// AVX512-BF16's vdpbf16ps (Semantics/PairedProducts.h): acc[l] + a[2l] b[2l] + a[2l+1] b[2l+1]
// for the 16 f32 lanes of acc and the 32 bf16 of a and b (denormal inputs and outputs flushed).
mlir::Value dotBf16Pairs(mlir::ImplicitLocOpBuilder& b, mlir::Value acc, mlir::Value a,
                         mlir::Value bPairs);
// The bf16 at `indices` of `buffer` (unit inner stride) and the next one as an i32, to
// broadcast as a pair.
mlir::Value loadBf16Pair(mlir::ImplicitLocOpBuilder& b, mlir::Value buffer,
                         mlir::ValueRange indices);
// A pair whose second element is 0: the bf16 at `indices` alone as an i32.
mlir::Value loadBf16Alone(mlir::ImplicitLocOpBuilder& b, mlir::Value buffer,
                          mlir::ValueRange indices);
// A vector of 16 f32 rounded to bf16 (to nearest even, vcvtneps2bf16).
mlir::Value roundToBf16(mlir::ImplicitLocOpBuilder& b, mlir::Value vector);
// An i32 pair in every lane of a vector of 2 x lanes bf16.
mlir::Value broadcastBf16Pair(mlir::ImplicitLocOpBuilder& b, mlir::Value pair, int64_t lanes);

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_KIT_PRODUCTS_H
