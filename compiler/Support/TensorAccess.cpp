#include "Support/TensorAccess.h"

#include "attnc/Float16.hpp"
#include "attnc/DType.hpp"
#include "attnc/TensorSpan.hpp"

#include <cstring>
#include <limits>
#include <stdexcept>

namespace attnc {
namespace {

// Calls visit(linear, elementOffset) for every element in row-major order.
template <class Visit> void forEachElement(const DLTensor& t, Visit visit) {
  int64_t count = elementCount(t);
  std::vector<int64_t> strides(t.ndim), index(t.ndim, 0);
  int64_t running = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    strides[d] = t.strides ? t.strides[d] : running;
    running *= t.shape[d];
  }
  int64_t offset = 0;
  for (int64_t linear = 0; linear < count; ++linear) {
    visit(linear, offset);
    for (int d = t.ndim - 1; d >= 0; --d) { // odometer increment
      offset += strides[d];
      if (++index[d] < t.shape[d])
        break;
      offset -= strides[d] * t.shape[d];
      index[d] = 0;
    }
  }
}

char* base(const DLTensor& t) {
  return static_cast<char*>(t.data) + t.byte_offset;
}

template <class T> T loadRaw(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <class T> void storeRaw(char* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

// v truncated toward zero to the integer type I. C++ leaves the conversion of NaN, or of a
// value whose truncation I cannot hold, undefined: such a value is refused.
template <class I> I toInteger(double v) {
  constexpr double below = static_cast<double>(std::numeric_limits<I>::min()) - 1;
  constexpr double above = static_cast<double>(std::numeric_limits<I>::max()) + 1;
  if (!(v > below && v < above))
    throw std::invalid_argument("tensor access: " + std::to_string(v) +
                                " is outside the range of the tensor's integer dtype");
  return static_cast<I>(v);
}

[[noreturn]] void unsupported(const DLTensor& t) {
  throw std::invalid_argument("tensor access: unsupported dtype " + dtypeName(t.dtype));
}

} // namespace

int64_t elementCount(const DLTensor& t) {
  const std::optional<int64_t> count = attnc::elementCount(t.shape, t.ndim);
  if (!count) // callers hold checked tensors: the runtime's, or HostTensors
    throw std::length_error("a tensor of more elements than 64 bits count");
  return *count;
}

std::vector<double> readDense(const DLTensor& t) {
  std::vector<double> values(elementCount(t));
  const char* p = base(t);
  const size_t size = dtypeBytes(t.dtype);
  auto read = [&](auto convert) {
    forEachElement(t, [&](int64_t linear, int64_t offset) {
      values[linear] = convert(p + offset * static_cast<int64_t>(size));
    });
  };
  const DLDataType d = t.dtype;
  if (sameDType(d, *parseDType("f64")))
    read([](const char* q) { return loadRaw<double>(q); });
  else if (sameDType(d, *parseDType("f32")))
    read([](const char* q) { return static_cast<double>(loadRaw<float>(q)); });
  else if (sameDType(d, *parseDType("f16")))
    read([](const char* q) { return halfToDouble(loadRaw<uint16_t>(q)); });
  else if (sameDType(d, *parseDType("bf16")))
    read([](const char* q) { return bfloat16ToDouble(loadRaw<uint16_t>(q)); });
  else if (sameDType(d, *parseDType("i64")))
    read([](const char* q) { return static_cast<double>(loadRaw<int64_t>(q)); });
  else if (sameDType(d, *parseDType("i32")))
    read([](const char* q) { return static_cast<double>(loadRaw<int32_t>(q)); });
  else if (sameDType(d, *parseDType("i8")))
    read([](const char* q) { return static_cast<double>(loadRaw<int8_t>(q)); });
  else if (sameDType(d, *parseDType("u8")))
    read([](const char* q) { return static_cast<double>(loadRaw<uint8_t>(q)); });
  else
    unsupported(t);
  return values;
}

void writeDense(DLTensor& t, const std::vector<double>& values) {
  if (static_cast<int64_t>(values.size()) != elementCount(t))
    throw std::invalid_argument("tensor access: value count does not match the tensor");
  char* p = base(t);
  const size_t size = dtypeBytes(t.dtype);
  auto write = [&](auto store) {
    forEachElement(t, [&](int64_t linear, int64_t offset) {
      store(p + offset * static_cast<int64_t>(size), values[linear]);
    });
  };
  const DLDataType d = t.dtype;
  if (sameDType(d, *parseDType("f64")))
    write([](char* q, double v) { storeRaw<double>(q, v); });
  else if (sameDType(d, *parseDType("f32")))
    write([](char* q, double v) { storeRaw<float>(q, static_cast<float>(v)); });
  else if (sameDType(d, *parseDType("f16")))
    write([](char* q, double v) { storeRaw<uint16_t>(q, doubleToHalf(v)); });
  else if (sameDType(d, *parseDType("bf16")))
    write([](char* q, double v) { storeRaw<uint16_t>(q, doubleToBfloat16(v)); });
  else if (sameDType(d, *parseDType("i32")))
    write([](char* q, double v) { storeRaw<int32_t>(q, toInteger<int32_t>(v)); });
  else if (sameDType(d, *parseDType("i8")))
    write([](char* q, double v) { storeRaw<int8_t>(q, toInteger<int8_t>(v)); });
  else if (sameDType(d, *parseDType("u8")))
    write([](char* q, double v) { storeRaw<uint8_t>(q, toInteger<uint8_t>(v)); });
  else
    unsupported(t);
}

} // namespace attnc
