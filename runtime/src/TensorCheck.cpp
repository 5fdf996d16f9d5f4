#include "TensorCheck.h"

#include "attnc/DType.hpp"
#include "attnc/TensorSpan.hpp"

#include <algorithm>
#include <cstdint>

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

// True when no two index tuples address the same element: with the dims of extent > 1 sorted by
// stride, each stride covers the whole span of the ones below it.
bool nonOverlapping(const DLTensor& t) {
  std::vector<int64_t> strides = elementStrides(t);
  std::vector<int> dims;
  for (int d = 0; d < t.ndim; ++d)
    if (t.shape[d] > 1)
      dims.push_back(d);
  std::sort(dims.begin(), dims.end(), [&](int a, int b) { return strides[a] < strides[b]; });
  int64_t span = 1;
  for (int d : dims) {
    if (strides[d] < span)
      return false;
    span = checkedMul(strides[d], t.shape[d]).value_or(INT64_MAX);
  }
  return true;
}

std::optional<std::string> checkOne(const ArgumentSpec& arg, const DLTensor& t,
                                    const std::string& device, RunSizes& sizes, TensorSpan& span) {
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
  // The rank first, so a corrupt ndim is never used to read the shape.
  if (t.ndim != static_cast<int>(arg.shape.size()))
    return name + " has rank " + std::to_string(t.ndim) + "; expected " + expectedShape(arg);
  if (auto problem = measureSpan(t, span))
    return name + " " + *problem;
  for (int d = 0; d < t.ndim; ++d)
    if (arg.shape[d].binds() && sizes[*arg.shape[d].symbol] == 0) {
      const std::optional<int64_t> size = arg.shape[d].boundSize(t.shape[d]);
      if (t.shape[d] < 1 || !size)
        return name + " has extent " + std::to_string(t.shape[d]) + " for " + arg.shape[d].str() +
               "; sizes must be at least 1 and fit in 64 bits";
      sizes[*arg.shape[d].symbol] = *size;
    }
  for (int d = 0; d < t.ndim; ++d) {
    std::optional<int64_t> want = arg.shape[d].evaluate(sizes);
    bool ok = want && (t.shape[d] == *want || (arg.shape[d].broadcastable && t.shape[d] == 1));
    if (!ok) {
      // A ragged batch's calls bind total_q, not Tq.
      const SizeSymbol rows =
          sizes[SizeSymbol::QueryRows] != 0 ? SizeSymbol::QueryRows : SizeSymbol::SeqQ;
      return name + " has shape " + shapeString(t) + "; expected " + expectedShape(arg) +
             " with B=" + std::to_string(sizes[SizeSymbol::Batch]) + " " +
             std::string(kSizeSymbolNames[static_cast<int>(rows)]) + "=" +
             std::to_string(sizes[rows]) + " Tk=" + std::to_string(sizes[SizeSymbol::SeqK]) +
             " (dimension " + std::to_string(d) + ")";
    }
  }
  if (!t.data)
    return name + " has no data pointer";
  if (span.first % dtypeBytes(t.dtype) != 0)
    return name + " is not aligned to its element size " + std::to_string(dtypeBytes(t.dtype));
  if (arg.role == ArgumentRole::Output && !nonOverlapping(t))
    return name + " is an output whose strides make elements overlap";
  return std::nullopt;
}

} // namespace

std::optional<std::string> checkTensors(const RuntimeManifest& manifest, const std::string& device,
                                        const std::vector<DLTensor*>& tensors, RunSizes& sizes) {
  std::vector<TensorSpan> spans(tensors.size());
  for (std::size_t i = 0; i < manifest.arguments.size(); ++i)
    if (auto problem = checkOne(manifest.arguments[i], *tensors[i], device, sizes, spans[i]))
      return problem;
  // A kernel may write an output before it has read all inputs: outputs alias nothing.
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (manifest.arguments[i].role != ArgumentRole::Output)
      continue;
    for (std::size_t j = 0; j < tensors.size(); ++j) {
      if (j == i)
        continue;
      if (spans[i].first < spans[j].end() && spans[j].first < spans[i].end())
        return "tensor '" + manifest.arguments[i].name + "' shares memory with tensor '" +
               manifest.arguments[j].name + "'; outputs must not overlap any other argument";
    }
  }
  return std::nullopt;
}

} // namespace attnc::runtime
