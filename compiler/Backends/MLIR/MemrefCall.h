// Calling MLIR-generated C-interface functions from a bundle's kernel entry: DLPack tensors as
// memref descriptors, passed as one pointer each after some leading scalars.
#ifndef ATTNC_COMPILER_BACKENDS_MLIR_MEMREFCALL_H
#define ATTNC_COMPILER_BACKENDS_MLIR_MEMREFCALL_H

#include <cstdint>
#include <cstdlib>
#include <dlpack/dlpack.h>
#include <utility>

namespace attnc::mlirkernel {

inline constexpr uint32_t kMaxArgs = 12;
inline constexpr int kMaxRank = 4;

// MLIR's memref descriptor: {allocated, aligned, offset, sizes[rank], strides[rank]}; sizes
// and strides are contiguous, so one layout with room for the largest rank serves all ranks.
struct Memref {
  void* allocated;
  void* aligned;
  int64_t offset;
  int64_t sizesAndStrides[2 * kMaxRank];
};

inline Memref describe(const DLTensor& t) {
  Memref m{};
  m.allocated = m.aligned = static_cast<char*>(t.data) + t.byte_offset;
  int64_t compact = 1;
  for (int k = t.ndim - 1; k >= 0; --k) {
    m.sizesAndStrides[k] = t.shape[k];
    m.sizesAndStrides[t.ndim + k] = t.strides ? t.strides[k] : compact;
    compact *= t.shape[k];
  }
  return m;
}

template <size_t> using MemrefArg = Memref*;

template <class R, size_t... I, class... Leading>
R callExactly(void (*fn)(), Memref** args, std::index_sequence<I...>, Leading... leading) {
  using Fn = R (*)(Leading..., MemrefArg<I>...);
  return reinterpret_cast<Fn>(fn)(leading..., args[I]...);
}

// fn(leading..., args[0], ..., args[count - 1]), for count <= kMaxArgs (the caller checks).
template <class R, size_t N = 0, class... Leading>
R callWithMemrefs(void (*fn)(), uint32_t count, Memref** args, Leading... leading) {
  if constexpr (N > kMaxArgs) {
    std::abort();
  } else {
    if (count == N)
      return callExactly<R>(fn, args, std::make_index_sequence<N>(), leading...);
    return callWithMemrefs<R, N + 1>(fn, count, args, leading...);
  }
}

} // namespace attnc::mlirkernel

#endif // ATTNC_COMPILER_BACKENDS_MLIR_MEMREFCALL_H
