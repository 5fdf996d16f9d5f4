//===- MmaAlignedArgs.h - the tensor-core kernels' alignment contract ---------===//
//
// Tensor-core kernels copy 16-byte chunks of q, k and v rows with cp.async and read and write
// element pairs, so those tensors need a unit innermost stride, a 16-byte aligned start and
// every other stride a multiple of 8 elements. The lowering records which kernel arguments
// need this in a public i32 bit mask of this name; the bundle's entry checks it before a
// launch. No MLIR here: the runtime side includes it too.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMS_MMAALIGNEDARGS_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMS_MMAALIGNEDARGS_H

namespace attnc::attn {

inline constexpr const char kMmaAlignedArgsSymbol[] = "attnc_mma_aligned_args";
inline constexpr int kMmaAlignBytes = 16;

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_MMAALIGNEDARGS_H
