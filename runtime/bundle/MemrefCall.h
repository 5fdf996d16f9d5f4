// Calling MLIR-generated C-interface functions from a bundle's kernel entry: DLPack tensors as
// memref descriptors, passed as one pointer each after some leading scalars.
#ifndef ATTNC_RUNTIME_BUNDLE_MEMREFCALL_H
#define ATTNC_RUNTIME_BUNDLE_MEMREFCALL_H

#include "attnc/attnc.h"

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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

// The call's tensors as descriptors, and pointers to them, in manifest order, with room for
// one more pointer after them (the CPU kernels' workspace).
struct Descriptors {
  explicit Descriptors(const attnc_kernel_call& call) {
    for (uint32_t a = 0; a < call.num_args && a < kMaxArgs; ++a) {
      memrefs[a] = describe(*call.args[a]);
      pointers[a] = &memrefs[a];
    }
  }
  std::array<Memref, kMaxArgs> memrefs{};
  std::array<Memref*, kMaxArgs + 1> pointers{};
};

// Whether this bundle can take the call (ABI version, argument count); writes why not.
inline bool acceptCall(const attnc_kernel_call& call, char* message, size_t messageSize) {
  if (call.abi_version != ATTNC_ABI_VERSION) {
    std::snprintf(message, messageSize, "caller uses ABI version %u; this bundle has %u",
                  call.abi_version, ATTNC_ABI_VERSION);
    return false;
  }
  if (call.num_args > kMaxArgs) {
    std::snprintf(message, messageSize, "mlir bundle: %u arguments, at most %u supported",
                  call.num_args, kMaxArgs);
    return false;
  }
  return true;
}

template <size_t> using MemrefArg = Memref*;

template <class R, size_t... I, class... Leading>
R callExactly(void (*fn)(), Memref** args, std::index_sequence<I...>, Leading... leading) {
  using Fn = R (*)(Leading..., MemrefArg<I>...);
  return reinterpret_cast<Fn>(fn)(leading..., args[I]...);
}

// fn(leading..., args[0], ..., args[count - 1]), for count <= kMaxArgs + 1 (the caller checks
// the arguments; the one more is a workspace).
template <class R, size_t N = 0, class... Leading>
R callWithMemrefs(void (*fn)(), uint32_t count, Memref** args, Leading... leading) {
  if constexpr (N > kMaxArgs + 1) {
    std::abort();
  } else {
    if (count == N)
      return callExactly<R>(fn, args, std::make_index_sequence<N>(), leading...);
    return callWithMemrefs<R, N + 1>(fn, count, args, leading...);
  }
}

} // namespace attnc::mlirkernel

#endif // ATTNC_RUNTIME_BUNDLE_MEMREFCALL_H
