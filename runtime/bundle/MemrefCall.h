// Calling MLIR-generated functions from a bundle's kernel entry: DLPack tensors as memref
// descriptors, passed through the functions' packed interfaces.
//
// For each C-interface function _mlir_ciface_<f> (memrefs as pointers to descriptors), the
// backend adds <f>_packed(void** args) (MlirTarget.cpp's addPackedInterfaces): args[i] points
// at argument i, and args[n] at where the result goes when there is one, so one signature calls
// a kernel of any number of arguments.
#ifndef ATTNC_RUNTIME_BUNDLE_MEMREFCALL_H
#define ATTNC_RUNTIME_BUNDLE_MEMREFCALL_H

#include "attnc/attnc.h"

#include <cstdint>
#include <cstdio>
#include <type_traits>
#include <vector>

namespace attnc::mlirkernel {

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
  explicit Descriptors(const attnc_kernel_call& call)
      : memrefs(call.num_args), pointers(call.num_args + 1, nullptr) {
    for (uint32_t a = 0; a < call.num_args; ++a) {
      memrefs[a] = describe(*call.args[a]);
      pointers[a] = &memrefs[a];
    }
  }
  std::vector<Memref> memrefs;
  std::vector<Memref*> pointers;
};

using PackedFunction = void (*)(void** args);

// f(leading..., memrefs[0], ..., memrefs[count - 1]) through its packed interface `fn`; R is
// f's result type (void: none), Leading its leading scalars' types.
template <class R, class... Leading>
R callPacked(void* fn, uint32_t count, Memref* const* memrefs, Leading... leading) {
  std::vector<void*> args{static_cast<void*>(&leading)...};
  for (uint32_t a = 0; a < count; ++a)
    args.push_back(const_cast<Memref**>(&memrefs[a]));
  if constexpr (std::is_void_v<R>) {
    reinterpret_cast<PackedFunction>(fn)(args.data());
  } else {
    R result{};
    args.push_back(&result);
    reinterpret_cast<PackedFunction>(fn)(args.data());
    return result;
  }
}

} // namespace attnc::mlirkernel

#endif // ATTNC_RUNTIME_BUNDLE_MEMREFCALL_H
