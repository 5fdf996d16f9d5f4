#include "KvCacheCheck.h"

#include "attnc/CudaDriver.hpp"

#include <cstring>

namespace attnc::runtime {
namespace {

// The i32 elements of a rank-1 or rank-2 tensor, row-major, read through its strides (from the
// device when it is there); empty and *problem set when the device cannot be read.
std::vector<int32_t> readInts(const DLTensor& t, const std::string& device, const std::string& name,
                              std::string* problem) {
  const int64_t rows = t.ndim == 2 ? t.shape[0] : 1, columns = t.shape[t.ndim - 1];
  const int64_t rowStride = t.ndim == 2 ? (t.strides ? t.strides[0] : columns) : 0;
  const int64_t columnStride = t.strides ? t.strides[t.ndim - 1] : 1;
  const int64_t last = (rows - 1) * rowStride + (columns - 1) * columnStride; // strides >= 0
  const auto* base = static_cast<const char*>(t.data) + t.byte_offset;
  std::vector<int32_t> span(static_cast<size_t>(last + 1));
  if (device == "cuda") {
    std::string why;
    attnc::cuda::Device gpu;
    const attnc::cuda::Driver* driver = attnc::cuda::driver(&why);
    if (!driver || !attnc::cuda::useDevice(&gpu, &why)) {
      *problem = "cannot read " + name + " to check it: " + why;
      return {};
    }
    const auto address = reinterpret_cast<attnc::cuda::CUdeviceptr>(base);
    if (attnc::cuda::CUresult r =
            driver->cuMemcpyDtoH(span.data(), address, span.size() * sizeof(int32_t));
        r != 0) {
      *problem = "cannot read " + name + " to check it: " + attnc::cuda::errorText(*driver, r);
      return {};
    }
  } else {
    std::memcpy(span.data(), base, span.size() * sizeof(int32_t));
  }
  std::vector<int32_t> values;
  values.reserve(static_cast<size_t>(rows * columns));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < columns; ++c)
      values.push_back(span[static_cast<size_t>(r * rowStride + c * columnStride)]);
  return values;
}

} // namespace

std::optional<std::string> checkKvCache(const RuntimeManifest& manifest, const std::string& device,
                                        const std::vector<DLTensor*>& tensors,
                                        const RunSizes& sizes, CacheIndices* indices) {
  const DLTensor* seqLens = argumentNamed(manifest, tensors, "seq_lens");
  if (!seqLens)
    return std::nullopt;
  std::string problem;
  const std::vector<int32_t> lengths = readInts(*seqLens, device, "seq_lens", &problem);
  if (!problem.empty())
    return problem;
  const int64_t capacity = sizes[SizeSymbol::SeqK];
  for (size_t b = 0; b < lengths.size(); ++b)
    if (lengths[b] < 0 || lengths[b] > capacity)
      return "seq_lens[" + std::to_string(b) + "] = " + std::to_string(lengths[b]) +
             " is outside [0, Tk=" + std::to_string(capacity) +
             "]: a sequence holds at most the cache's Tk keys";

  const DLTensor* table = argumentNamed(manifest, tensors, "block_table");
  if (!table) {
    indices->lengths = lengths;
    return std::nullopt;
  }
  const DLTensor* pages = argumentNamed(manifest, tensors, "k_pages");
  const int64_t perSequence = table->shape[1], pageSize = capacity / perSequence,
                pageCount = pages->shape[0];
  const std::vector<int32_t> entries = readInts(*table, device, "block_table", &problem);
  if (!problem.empty())
    return problem;
  for (size_t b = 0; b < lengths.size(); ++b)
    for (int64_t p = 0; p * pageSize < lengths[b]; ++p) {
      const int32_t page = entries[b * static_cast<size_t>(perSequence) + static_cast<size_t>(p)];
      if (page < 0 || page >= pageCount)
        return "block_table[" + std::to_string(b) + ", " + std::to_string(p) + "] = " +
               std::to_string(page) + " names no page: k_pages and v_pages have " +
               std::to_string(pageCount) + " (sequence " + std::to_string(b) + " holds " +
               std::to_string(lengths[b]) + " keys, in its first " +
               std::to_string((lengths[b] + pageSize - 1) / pageSize) + " entries)";
    }
  *indices = {lengths, entries, perSequence};
  return std::nullopt;
}

std::optional<std::string> readQueryOffsets(const RuntimeManifest& manifest,
                                            const std::string& device,
                                            const std::vector<DLTensor*>& tensors,
                                            const RunSizes& sizes, std::vector<int64_t>* offsets) {
  const DLTensor* cu = argumentNamed(manifest, tensors, "cu_seqlens_q");
  std::string problem;
  const std::vector<int32_t> values = readInts(*cu, device, "cu_seqlens_q", &problem);
  if (!problem.empty())
    return problem;
  const int64_t rows = sizes[SizeSymbol::QueryRows];
  auto at = [](size_t i, int64_t v) {
    return "cu_seqlens_q[" + std::to_string(i) + "] = " + std::to_string(v);
  };
  if (values.front() != 0)
    return at(0, values.front()) + "; the first sequence's rows start at 0";
  for (size_t b = 1; b < values.size(); ++b)
    if (values[b] < values[b - 1])
      return at(b, values[b]) + " is less than " + at(b - 1, values[b - 1]) +
             "; the offsets never decrease (sequence " + std::to_string(b - 1) +
             " would have a negative row count)";
  if (values.back() != rows)
    return at(values.size() - 1, values.back()) + " is not total_q = " + std::to_string(rows) +
           ", the rows of q and o; the last offset ends the last sequence";
  offsets->assign(values.begin(), values.end());
  return std::nullopt;
}

} // namespace attnc::runtime
