//===- MmaContract.h - what the tensor-core kernels ask of their callers ------===//
//
// Shared by the lowering (LowerToMma.cpp), the schedule check (TransformSchedule.cpp) and the
// bundle entry (MlirCudaKernel.cpp); no MLIR here.
//
// Alignment: the kernels copy 16-byte chunks of q, k and v rows with cp.async and read and
// write element pairs, so those tensors need a unit innermost stride, a 16-byte aligned start
// and every other stride a multiple of 16 bytes. The lowering records which kernel arguments
// need this in a public i32 bit mask named kMmaAlignedArgsSymbol; the entry checks it before
// a launch.
//
// Shared memory: a K and a V tile of key_block rows, each row padded by kMmaRowPad elements
// (so ldmatrix's 8 row addresses fall in different banks), within the static limit.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_RUNTIME_BUNDLE_MMACONTRACT_H
#define ATTNC_RUNTIME_BUNDLE_MMACONTRACT_H

#include <cstdint>

namespace attnc::attn {

inline constexpr const char kMmaAlignedArgsSymbol[] = "attnc_mma_aligned_args";
// The same for a backward=true bundle's backward kernel (MmaBackward.cpp), over its arguments.
inline constexpr const char kMmaBackwardAlignedArgsSymbol[] = "attnc_mma_backward_aligned_args";
inline constexpr int kMmaAlignBytes = 16;

inline constexpr int64_t kMmaRowPad = 8;              // elements per shared-memory row
inline constexpr int64_t kMmaSharedLimit = 48 * 1024; // bytes of static shared memory

// Bytes of shared memory the K and V tiles take, and with quantized rows their keys' scales
// (an f32 per key of each).
inline constexpr int64_t mmaSharedBytes(int64_t keyBlock, int64_t dk, int64_t dv,
                                        int64_t elementBytes, bool rowScales = false) {
  return keyBlock * ((dk + kMmaRowPad + dv + kMmaRowPad) * elementBytes + (rowScales ? 8 : 0));
}

} // namespace attnc::attn

#endif // ATTNC_RUNTIME_BUNDLE_MMACONTRACT_H
