// The memory a strided DLPack tensor can touch, computed once, in 64 bits, with every product and
// sum checked. The runtime's tensor and overlap checks, the kernel entries, the tools' allocator
// and the .npy reader all size tensors through this header, so no caller multiplies extents on
// its own and none can overflow.
#ifndef ATTNC_TENSORSPAN_HPP
#define ATTNC_TENSORSPAN_HPP

#include "attnc/DType.hpp"

#include <cstdint>
#include <dlpack/dlpack.h>
#include <optional>
#include <string>
#include <vector>

namespace attnc {

// No attnc argument has more than 5 dims; a larger ndim is a corrupt or foreign DLTensor, and
// is refused before its shape is read.
inline constexpr int32_t kMaxTensorRank = 16;

// a * b and a + b of non-negative values; empty when the result does not fit in int64.
inline std::optional<int64_t> checkedMul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    return std::nullopt;
  return r;
}
inline std::optional<int64_t> checkedAdd(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

// The product of `ndim` extents; empty when one is negative or the product overflows int64.
inline std::optional<int64_t> elementCount(const int64_t* shape, int32_t ndim) {
  int64_t count = 1;
  for (int32_t d = 0; d < ndim; ++d) {
    if (shape[d] < 0)
      return std::nullopt;
    auto next = checkedMul(count, shape[d]);
    if (!next)
      return std::nullopt;
    count = *next;
  }
  return count;
}

// The bytes `count` elements of `dtype` take; empty past PTRDIFF_MAX (no object is larger).
inline std::optional<int64_t> byteCount(int64_t count, DLDataType dtype) {
  auto bytes = checkedMul(count, static_cast<int64_t>(dtypeBytes(dtype)));
  if (!bytes || *bytes > PTRDIFF_MAX)
    return std::nullopt;
  return bytes;
}

struct TensorSpan {
  int64_t elements = 0;     // Π n_d
  int64_t furthest = -1;    // Σ (n_d - 1) s_d: the furthest element's offset (-1 when empty)
  std::uintptr_t first = 0; // the address of element 0: data + byte_offset
  uint64_t bytes = 0;       // from `first` to one past the furthest element's last byte
  std::uintptr_t end() const { return first + bytes; }
};

// Measures `t` into `span`, or says why it cannot be: ndim outside [0, kMaxTensorRank], a null
// shape, a negative extent or stride, a zero-sized dtype, or a size, offset or end address
// that overflows 64 bits or the address space. NULL strides mean compact row-major.
inline std::optional<std::string> measureSpan(const DLTensor& t, TensorSpan& span) {
  if (t.ndim < 0 || t.ndim > kMaxTensorRank)
    return "has ndim " + std::to_string(t.ndim) + "; at most " + std::to_string(kMaxTensorRank) +
           " dims are allowed";
  if (t.ndim > 0 && !t.shape)
    return "has a null shape pointer for ndim " + std::to_string(t.ndim);
  const int64_t elementBytes = static_cast<int64_t>(dtypeBytes(t.dtype));
  if (elementBytes == 0)
    return "has dtype " + dtypeName(t.dtype) + ", whose elements take no bytes";
  auto elements = elementCount(t.shape, t.ndim);
  if (!elements) {
    for (int32_t d = 0; d < t.ndim; ++d)
      if (t.shape[d] < 0)
        return "has negative extent " + std::to_string(t.shape[d]) + " in dimension " +
               std::to_string(d);
    return "has more elements than 64 bits can count";
  }
  span = TensorSpan{};
  span.elements = *elements;
  span.first = reinterpret_cast<std::uintptr_t>(t.data);
  if (t.byte_offset > UINTPTR_MAX - span.first || t.byte_offset > uint64_t{PTRDIFF_MAX})
    return "has byte_offset " + std::to_string(t.byte_offset) + ", past the address space";
  span.first += t.byte_offset;
  if (span.elements == 0)
    return std::nullopt;
  int64_t furthest = 0, compact = 1;
  for (int32_t d = t.ndim - 1; d >= 0; --d) {
    const int64_t stride = t.strides ? t.strides[d] : compact;
    if (stride < 0)
      return "has negative stride " + std::to_string(stride) + " in dimension " +
             std::to_string(d) + "; strides must be non-negative";
    auto reach = checkedMul(t.shape[d] - 1, stride);
    auto sum = reach ? checkedAdd(furthest, *reach) : std::nullopt;
    if (!sum)
      return "has strides that reach past 64-bit offsets (dimension " + std::to_string(d) + ")";
    furthest = *sum;
    compact *= t.shape[d]; // no overflow: at most the element count
  }
  auto bytes = checkedAdd(furthest, 1);
  bytes = bytes ? byteCount(*bytes, t.dtype) : std::nullopt;
  if (!bytes || static_cast<uint64_t>(*bytes) > UINTPTR_MAX - span.first)
    return "spans more bytes than the address space holds";
  span.furthest = furthest;
  span.bytes = static_cast<uint64_t>(*bytes);
  return std::nullopt;
}

// Element strides, compact row-major where the tensor has none. For tensors that passed the
// shape check (every extent at least 1) and whose span was measured, so the running product is at
// most the element count and cannot overflow.
inline std::vector<int64_t> elementStrides(const DLTensor& t) {
  std::vector<int64_t> strides(static_cast<size_t>(t.ndim));
  for (int64_t d = t.ndim - 1, running = 1; d >= 0; --d) {
    strides[d] = t.strides ? t.strides[d] : running;
    running *= t.shape[d];
  }
  return strides;
}

} // namespace attnc

#endif // ATTNC_TENSORSPAN_HPP
