//===- Products.h - the ways of multiplying -------------------------------===//
//
// Every way the kernels multiply, one implementation each: FMAs on widened f32 values (a
// register tile's rank-1 update), AVX512-BF16's pair products (vdpbf16ps) with the bf16 pairs
// they read, AMX tiles (tdpbf16ps) and the tensor cores' mma.sync.
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

// The register tile of an additive score (Bahdanau's): acc[s * R + r] += weight *
// tanh(rowVectors[r] + scalars[s]) for the R vectors of query rows' hidden elements and each
// key's hidden element, `weight` (a scalar) the step's weight.
llvm::SmallVector<mlir::Value> tanhUpdate(mlir::ImplicitLocOpBuilder& b,
                                          mlir::ArrayRef<mlir::Value> rowVectors,
                                          mlir::ArrayRef<mlir::Value> scalars, mlir::Value weight,
                                          mlir::ValueRange acc);

// The register tile of the additive score through exponentials (Transforms/AdditiveKeys.h):
// acc[s * R + r] += weight / (rowVectors[r] * scalars[s] + 1), for E of the query rows' and of
// each key's hidden element and `weight` (a scalar) -2 times the step's weight.
llvm::SmallVector<mlir::Value> reciprocalUpdate(mlir::ImplicitLocOpBuilder& b,
                                                mlir::ArrayRef<mlir::Value> rowVectors,
                                                mlir::ArrayRef<mlir::Value> scalars,
                                                mlir::Value weight, mlir::ValueRange acc);

// The register tile of AVX512-BF16 dot products: acc[s * R + r] += vdpbf16ps(rowPairs[r],
// pairs[s] in every lane) for R vectors of 2W bf16 (pairs of query rows) and each i32 pair
// (two elements of a key or value): rankOneUpdate with two products per lane and instruction.
llvm::SmallVector<mlir::Value> pairDotUpdate(mlir::ImplicitLocOpBuilder& b,
                                             mlir::ArrayRef<mlir::Value> rowPairs,
                                             mlir::ArrayRef<mlir::Value> pairs,
                                             mlir::ValueRange acc);

// AMX tiles: acc[a * bTiles + t] += A_a B_t (tdpbf16ps: 16 x 16 f32 += 16 x 32 bf16 times
// 16 x 16 pairs) over `steps` steps of the contraction, loadA(step, a) and loadB(step, t)
// giving the bf16 tiles: each B tile loaded once a step for every A tile.
llvm::SmallVector<mlir::Value> amxTileProducts(
    mlir::ImplicitLocOpBuilder& b, llvm::SmallVector<mlir::Value> acc, int64_t aTiles,
    int64_t bTiles, int64_t steps,
    llvm::function_ref<mlir::Value(mlir::ImplicitLocOpBuilder&, int64_t, int64_t)> loadA,
    llvm::function_ref<mlir::Value(mlir::ImplicitLocOpBuilder&, int64_t, int64_t)> loadB);

// A tensor-core MMA, mma.sync m16n8k16: acc (4 f32 of a 16 x 8 C fragment) += a (A's 16 x 16
// fragment of f16 or bf16) times bFrag (B's 16 x 8).
mlir::Value mmaSync(mlir::ImplicitLocOpBuilder& b, mlir::Value a, mlir::Value bFrag,
                    mlir::Value acc);
// mma.sync m16n8k8 .tf32: acc (4 f32 of a 16 x 8 C fragment) += a (A's 16 x 8 fragment,
// vector<4x1xf32>) times bFrag (B's 8 x 8, vector<2x1xf32>), each operand's low 13 mantissa
// bits ignored (roundToTf32 rounds them away first).
mlir::Value mmaSyncTf32(mlir::ImplicitLocOpBuilder& b, mlir::Value a, mlir::Value bFrag,
                        mlir::Value acc);
// An f32 rounded to TF32 (10 bits of mantissa) to nearest, ties away from zero (cvt.rna.tf32.f32,
// sm_80 and newer), still an f32: exact for f16 and bf16 values.
mlir::Value roundToTf32(mlir::ImplicitLocOpBuilder& b, mlir::Value x);

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
// Two vectors of 16 f32 rounded to bf16 and interleaved into 16 pairs (even[l], odd[l]): one
// vcvtne2ps2bf16 and one vpermw.
mlir::Value roundToBf16Pairs(mlir::ImplicitLocOpBuilder& b, mlir::Value even, mlir::Value odd);
// An i32 pair in every lane of a vector of 2 x lanes bf16.
mlir::Value broadcastBf16Pair(mlir::ImplicitLocOpBuilder& b, mlir::Value pair, int64_t lanes);

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_KIT_PRODUCTS_H
