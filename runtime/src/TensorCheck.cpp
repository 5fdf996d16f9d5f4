#include "TensorCheck.h"

#include "attnc/DType.hpp"
#include "attnc/TensorSpan.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>

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

// One term of a tensor's element offsets, in bytes: c · step for c in [lo, hi].
struct OffsetTerm {
  __int128 step, lo, hi;
};

// Whether r = Σ c_k step_k + t for some c_k in [lo_k, hi_k] and |t| < width, the terms ordered
// by decreasing step. The rest's range bounds each c_k; where the steps nest (each one past the
// reach of the ones below it) that leaves at most two values. More, or past `budget` terms
// visited, counts as reachable: the caller then refuses what it cannot decide.
bool reachable(std::span<const OffsetTerm> terms, __int128 r, __int128 width, int& budget) {
  if (terms.empty())
    return -width < r && r < width;
  __int128 restLo = 0, restHi = 0;
  for (const OffsetTerm& t : terms.subspan(1)) {
    restLo += t.lo * t.step;
    restHi += t.hi * t.step;
  }
  const OffsetTerm& top = terms.front();
  // r - c · step must lie in (restLo - width, restHi + width).
  auto floorDiv = [](__int128 a, __int128 b) { return a / b - (a % b != 0 && a < 0); };
  const __int128 lo = std::max(top.lo, -floorDiv(restHi + width - 1 - r, top.step));
  const __int128 hi = std::min(top.hi, floorDiv(r - restLo + width - 1, top.step));
  if (hi - lo > 1 || --budget < 0)
    return true;
  for (__int128 c = lo; c <= hi; ++c)
    if (reachable(terms.subspan(1), r - c * top.step, width, budget))
      return true;
  return false;
}

// Whether tensors a and b may share a byte. Spans that do not meet share none. Views of one
// buffer with the same element size and strides (k and v interleaved in one cache, as
// FlashInfer stores pages) share one exactly when b's start minus a's is within an element of
// Σ c_d s_d with c_d in (-n_b_d, n_a_d) (an element of a minus one of b); other pairs whose
// spans meet are taken as sharing.
bool mayShare(const DLTensor& a, const TensorSpan& sa, const DLTensor& b, const TensorSpan& sb) {
  if (!(sa.first < sb.end() && sb.first < sa.end()))
    return false;
  const std::vector<int64_t> strides = elementStrides(a);
  const auto bytes = static_cast<int64_t>(dtypeBytes(a.dtype));
  if (a.ndim != b.ndim || bytes != static_cast<int64_t>(dtypeBytes(b.dtype)) ||
      strides != elementStrides(b))
    return true;
  std::vector<OffsetTerm> terms;
  for (int d = 0; d < a.ndim; ++d)
    if (strides[d] > 0 && (a.shape[d] > 1 || b.shape[d] > 1))
      terms.push_back({__int128{strides[d]} * bytes, 1 - __int128{b.shape[d]},
                       __int128{a.shape[d]} - 1});
  std::sort(terms.begin(), terms.end(),
            [](const OffsetTerm& x, const OffsetTerm& y) { return x.step > y.step; });
  int budget = 64;
  return reachable(terms, __int128{sb.first} - __int128{sa.first}, bytes, budget);
}

// What a written argument is, for messages.
std::string writtenAs(const ArgumentSpec& arg) {
  return arg.role == ArgumentRole::Output ? "an output" : "a cache tensor kv_append writes into";
}

// The run-time sizes bound so far (0: not yet), and the argument that bound each.
struct Bindings {
  RunSizes& sizes;
  std::array<std::string, kSizeSymbols> from;
};

// The sizes `arg`'s shape uses, as bound so far: " with B=2 (from 'q'), Tk=9", each named after
// the tensor that bound it unless that is `arg` itself, so a tensor whose wrong extent bound a
// size is named beside the one that disagrees with it.
std::string sizesText(const ArgumentSpec& arg, const Bindings& bound) {
  std::string text;
  std::array<bool, kSizeSymbols> listed{};
  for (const DimExpr& dim : arg.shape) {
    if (!dim.symbol || listed[static_cast<int>(*dim.symbol)])
      continue;
    const int s = static_cast<int>(*dim.symbol);
    listed[s] = true;
    const int64_t size = bound.sizes[*dim.symbol];
    text += (text.empty() ? " with " : ", ") + std::string(kSizeSymbolNames[s]) +
            (size == 0 ? " unbound" : "=" + std::to_string(size));
    if (size != 0 && bound.from[s] != arg.name)
      text += " (from '" + bound.from[s] + "')";
  }
  return text;
}

std::optional<std::string> checkOne(const ArgumentSpec& arg, const DLTensor& t,
                                    const std::string& device, Bindings& bound,
                                    TensorSpan& span) {
  RunSizes& sizes = bound.sizes;
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
      bound.from[static_cast<int>(*arg.shape[d].symbol)] = arg.name;
    }
  for (int d = 0; d < t.ndim; ++d) {
    std::optional<int64_t> want = arg.shape[d].evaluate(sizes);
    bool ok = want && (t.shape[d] == *want || (arg.shape[d].broadcastable && t.shape[d] == 1));
    if (!ok)
      return name + " has shape " + shapeString(t) + "; expected " + expectedShape(arg) +
             sizesText(arg, bound) + " (dimension " + std::to_string(d) + ")";
  }
  if (!t.data)
    return name + " has no data pointer";
  if (span.first % dtypeBytes(t.dtype) != 0)
    return name + " is not aligned to its element size " + std::to_string(dtypeBytes(t.dtype));
  if (arg.written && !nonOverlapping(t))
    return name + " is " + writtenAs(arg) + " whose strides make elements overlap";
  return std::nullopt;
}

} // namespace

std::optional<std::string> checkTensors(const RuntimeManifest& manifest, const std::string& device,
                                        const std::vector<DLTensor*>& tensors, RunSizes& sizes) {
  std::vector<TensorSpan> spans(tensors.size());
  Bindings bound{sizes, {}};
  for (std::size_t i = 0; i < manifest.arguments.size(); ++i)
    if (auto problem = checkOne(manifest.arguments[i], *tensors[i], device, bound, spans[i]))
      return problem;
  // A kernel may write an output before it has read all inputs, and kv_append writes the cache
  // before the kernel reads it: what a call writes aliases nothing.
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const ArgumentSpec& arg = manifest.arguments[i];
    if (!arg.written)
      continue;
    for (std::size_t j = 0; j < tensors.size(); ++j)
      if (j != i && mayShare(*tensors[i], spans[i], *tensors[j], spans[j]))
        return "tensor '" + arg.name + "' shares memory with tensor '" +
               manifest.arguments[j].name + "'; '" + arg.name + "' is " + writtenAs(arg) +
               ", which must not overlap any other argument";
  }
  return std::nullopt;
}

} // namespace attnc::runtime
