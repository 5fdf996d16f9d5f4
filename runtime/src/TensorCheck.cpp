#include "TensorCheck.h"

#include "attnc/DType.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace attnc::runtime {
namespace {

std::string shapeString(const DLTensor& t) {
  std::string s = "[";
  for (int d = 0; d < t.ndim; ++d)
    s += (d ? "," : "") + std::to_string(t.shape[d]);
  return s + "]";
}

std::string expectedShape(const ArgumentSpec& arg) {
  std::string s = "[";
  for (std::size_t d = 0; d < arg.shape.size(); ++d)
    s += (d ? "," : "") + arg.shape[d].str();
  return s + "]";
}

// Element strides, compact row-major when the tensor has none.
std::vector<int64_t> elementStrides(const DLTensor& t) {
  std::vector<int64_t> strides(t.ndim);
  int64_t running = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    strides[d] = t.strides ? t.strides[d] : running;
    running *= t.shape[d];
  }
  return strides;
}

// True when no two index tuples address the same element: with the dims of extent > 1 sorted by
// stride, each stride covers the whole span of the ones below it.
bool nonOverlapping(const DLTensor& t, const std::vector<int64_t>& strides) {
  std::vector<int> dims;
  for (int d = 0; d < t.ndim; ++d)
    if (t.shape[d] > 1)
      dims.push_back(d);
  std::sort(dims.begin(), dims.end(), [&](int a, int b) { return strides[a] < strides[b]; });
  int64_t span = 1;
  for (int d : dims) {
    if (strides[d] < span)
      return false;
    span = strides[d] * t.shape[d];
  }
  return true;
}

std::optional<std::string> checkOne(const ArgumentSpec& arg, const DLTensor& t,
                                    const std::string& device, RunSizes& sizes) {
  const std::string name = "tensor '" + arg.name + "'";
  if (device == "cuda" && t.device.device_type != kDLCUDA)
    return name + " is not in CUDA device memory (device_type " +
           std::to_string(t.device.device_type) + "); this bundle runs on the GPU";
  if (device != "cuda" && t.device.device_type != kDLCPU)
    return name + " is not in host memory (device_type " + std::to_string(t.device.device_type) +
           "); this bundle runs on the CPU";
  if (std::none_of(arg.dtypes.begin(), arg.dtypes.end(),
                   [&](DLDataType d) { return sameDType(d, t.dtype); })) {
    std::string allowed;
    for (DLDataType d : arg.dtypes)
      allowed += (allowed.empty() ? "" : " or ") + dtypeName(d);
    return name + " has dtype " + dtypeName(t.dtype) + "; expected " + allowed;
  }
  if (t.ndim != static_cast<int>(arg.shape.size()))
    return name + " has rank " + std::to_string(t.ndim) + " " + shapeString(t) + "; expected " +
           expectedShape(arg);
  for (int d = 0; d < t.ndim; ++d)
    if (arg.shape[d].binds() && sizes[*arg.shape[d].symbol] == 0) {
      if (t.shape[d] < 1)
        return name + " has extent " + std::to_string(t.shape[d]) + " for " + arg.shape[d].str() +
               "; sizes must be at least 1";
      sizes[*arg.shape[d].symbol] = t.shape[d];
    }
  for (int d = 0; d < t.ndim; ++d) {
    std::optional<int64_t> want = arg.shape[d].evaluate(sizes);
    bool ok = want && (t.shape[d] == *want || (arg.shape[d].broadcastable && t.shape[d] == 1));
    if (!ok)
      return name + " has shape " + shapeString(t) + "; expected " + expectedShape(arg) +
             " with B=" + std::to_string(sizes[SizeSymbol::Batch]) +
             " Tq=" + std::to_string(sizes[SizeSymbol::SeqQ]) +
             " Tk=" + std::to_string(sizes[SizeSymbol::SeqK]) + " (dimension " + std::to_string(d) +
             ")";
  }
  if (!t.data)
    return name + " has no data pointer";
  auto address = reinterpret_cast<std::uintptr_t>(t.data) + t.byte_offset;
  if (address % dtypeBytes(t.dtype) != 0)
    return name + " is not aligned to its element size " + std::to_string(dtypeBytes(t.dtype));
  std::vector<int64_t> strides = elementStrides(t);
  for (int d = 0; d < t.ndim; ++d)
    if (strides[d] < 0)
      return name + " has negative stride " + std::to_string(strides[d]) + " in dimension " +
             std::to_string(d) + "; strides must be non-negative";
  if (arg.role == ArgumentRole::Output && !nonOverlapping(t, strides))
    return name + " is an output whose strides make elements overlap";
  return std::nullopt;
}

// The bytes [first, last) a tensor with non-negative strides can touch.
std::pair<std::uintptr_t, std::uintptr_t> byteSpan(const DLTensor& t) {
  std::vector<int64_t> strides = elementStrides(t);
  int64_t furthest = 0;
  for (int d = 0; d < t.ndim; ++d)
    furthest += (t.shape[d] - 1) * strides[d];
  auto first = reinterpret_cast<std::uintptr_t>(t.data) + t.byte_offset;
  return {first, first + (furthest + 1) * dtypeBytes(t.dtype)};
}

} // namespace

std::optional<std::string> checkTensors(const RuntimeManifest& manifest, const std::string& device,
                                        const std::vector<DLTensor*>& tensors, RunSizes& sizes) {
  for (std::size_t i = 0; i < manifest.arguments.size(); ++i)
    if (auto problem = checkOne(manifest.arguments[i], *tensors[i], device, sizes))
      return problem;
  // A kernel may write an output before it has read all inputs: outputs alias nothing.
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (manifest.arguments[i].role != ArgumentRole::Output)
      continue;
    auto [first, last] = byteSpan(*tensors[i]);
    for (std::size_t j = 0; j < tensors.size(); ++j) {
      if (j == i)
        continue;
      auto [otherFirst, otherLast] = byteSpan(*tensors[j]);
      if (first < otherLast && otherFirst < last)
        return "tensor '" + manifest.arguments[i].name + "' shares memory with tensor '" +
               manifest.arguments[j].name + "'; outputs must not overlap any other argument";
    }
  }
  return std::nullopt;
}

} // namespace attnc::runtime
