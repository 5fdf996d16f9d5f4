#include "KvAppend.h"

#include "attnc/DType.hpp"
#include "attnc/Float16.hpp"
#include "attnc/QuantizedRows.hpp"
#include "attnc/Rope.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>

namespace attnc::runtime {
namespace {

// The element offset of `index` in t, through its strides (compact row-major without them).
int64_t elementAt(const DLTensor& t, std::initializer_list<int64_t> index) {
  int64_t offset = 0, running = 1;
  const int64_t* i = index.end();
  for (int d = t.ndim - 1; d >= 0; --d) {
    offset += *--i * (t.strides ? t.strides[d] : running);
    running *= t.shape[d];
  }
  return offset;
}

char* elementPointer(const DLTensor& t, int64_t element) {
  return static_cast<char*>(t.data) + t.byte_offset + element * ((t.dtype.bits + 7) / 8);
}

// A new row's element (f32, f16 or bf16).
double readElement(const DLTensor& t, int64_t element) {
  const char* p = elementPointer(t, element);
  if (t.dtype.bits == 32) {
    float v = 0;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  uint16_t bits = 0;
  std::memcpy(&bits, p, sizeof bits);
  return t.dtype.code == kDLBfloat ? bfloat16ToDouble(bits) : halfToDouble(bits);
}

void writeElement(const DLTensor& t, int64_t element, double value) {
  char* p = elementPointer(t, element);
  if (t.dtype.code == kDLInt) { // an int8 cache's element, already rounded and clamped
    const auto v = static_cast<int8_t>(value);
    std::memcpy(p, &v, sizeof v);
  } else if (t.dtype.code == kDLUInt) { // an fp8_e4m3 cache's byte, already encoded
    const auto v = static_cast<uint8_t>(value);
    std::memcpy(p, &v, sizeof v);
  } else if (t.dtype.bits == 32) {
    const auto v = static_cast<float>(value);
    std::memcpy(p, &v, sizeof v);
  } else {
    const uint16_t bits = t.dtype.code == kDLBfloat ? doubleToBfloat16(value) : doubleToHalf(value);
    std::memcpy(p, &bits, sizeof bits);
  }
}

} // namespace

std::optional<std::string> appendNewRows(const RuntimeManifest& manifest,
                                         const std::vector<DLTensor*>& tensors,
                                         const RunSizes& sizes, const CacheIndices& cache,
                                         const std::vector<int64_t>& offsets) {
  const KvAppend& a = *manifest.kvAppend;
  const bool paged = a.order == "nhd" || a.order == "hnd";
  const int64_t batch = sizes[SizeSymbol::Batch];
  auto rowsOf = [&](int64_t b) {
    return offsets.empty() ? sizes[SizeSymbol::SeqQ] : offsets[b + 1] - offsets[b];
  };
  const std::vector<int32_t>& lengths = cache.lengths;
  for (int64_t b = 0; b < batch; ++b) {
    if (lengths[b] < rowsOf(b))
      return "seq_lens[" + std::to_string(b) + "] = " + std::to_string(lengths[b]) +
             " is less than the " + std::to_string(rowsOf(b)) + " new rows of sequence " +
             std::to_string(b) +
             " (kv_append writes them at its last positions, so seq_lens counts them)";
  }

  struct Part {
    const DLTensor *rows, *cache, *scale;
    bool rotated;
  };
  const Part parts[] = {
      {argumentNamed(manifest, tensors, "k_new"), argumentNamed(manifest, tensors, paged ? "k_pages" : "k"),
       argumentNamed(manifest, tensors, "k_scale"), a.ropeDims > 0},
      {argumentNamed(manifest, tensors, "v_new"), argumentNamed(manifest, tensors, paged ? "v_pages" : "v"),
       argumentNamed(manifest, tensors, "v_scale"), false}};
  const DLTensor& keys = *parts[0].rows;
  const bool packed = a.rowsOrder == "packed", rowsBshd = a.rowsOrder == "bshd";
  const bool rowFirst = a.order == "bshd" || a.order == "nhd"; // [outer, row, g] else [outer, g, row]
  const int64_t kvHeads = rowsBshd ? keys.shape[2] : keys.shape[1];
  const int64_t pageSize = !paged ? 0 : a.order == "nhd" ? parts[0].cache->shape[1]
                                                         : parts[0].cache->shape[2];
  // RoPE's angles at one position, formed once for every KV head's key row there.
  std::vector<double> cosines(static_cast<size_t>(a.ropeDims / 2)), sines(cosines.size());
  std::vector<double> x;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < rowsOf(b); ++i) {
      const int64_t position = lengths[b] - rowsOf(b) + i;
      rope::angles(position, a.ropeDims, a.ropeTheta, cosines.data(), sines.data());
      // The cache's outer index and row of this position.
      int64_t outer = b, row = position;
      if (paged) {
        outer = cache.blockTable[b * cache.pagesPerSequence + position / pageSize];
        row = position % pageSize;
      }
      for (int64_t g = 0; g < kvHeads; ++g)
        for (const Part& part : parts) {
          const DLTensor &rows = *part.rows, &stored = *part.cache;
          const int64_t dim = rows.shape[rows.ndim - 1];
          // Element e of the new row is at source + e * sourceStride, of its cache row at
          // target + e * targetStride; the scale (a quantized cache's) at the row's index
          // without e.
          const int64_t source = packed     ? elementAt(rows, {offsets[b] + i, g, 0})
                                 : rowsBshd ? elementAt(rows, {b, i, g, 0})
                                            : elementAt(rows, {b, g, i, 0});
          const int64_t target = rowFirst ? elementAt(stored, {outer, row, g, 0})
                                          : elementAt(stored, {outer, g, row, 0});
          const int64_t sourceStride = rows.strides ? rows.strides[rows.ndim - 1] : 1;
          const int64_t targetStride = stored.strides ? stored.strides[3] : 1;
          if (!part.rotated && !part.scale && sameDType(rows.dtype, stored.dtype)) {
            // The row as it is: its bits.
            const auto bytes = static_cast<size_t>((rows.dtype.bits + 7) / 8);
            for (int64_t e = 0; e < dim; ++e)
              std::memcpy(elementPointer(stored, target + e * targetStride),
                          elementPointer(rows, source + e * sourceStride), bytes);
            continue;
          }
          x.resize(static_cast<size_t>(dim));
          for (int64_t e = 0; e < dim; ++e)
            x[e] = readElement(rows, source + e * sourceStride);
          if (part.rotated)
            rope::rotate(x.data(), cosines.data(), sines.data(), a.ropeDims, a.ropeInterleaved);
          if (part.scale) // a u8 cache is an fp8_e4m3 one, an i8 cache an int8 one
            writeElement(*part.scale,
                         rowFirst ? elementAt(*part.scale, {outer, row, g})
                                  : elementAt(*part.scale, {outer, g, row}),
                         quantizeRow(x, stored.dtype.code == kDLUInt ? RowCode::E4m3
                                                                     : RowCode::Int8));
          for (int64_t e = 0; e < dim; ++e)
            writeElement(stored, target + e * targetStride, x[e]);
        }
    }
  return std::nullopt;
}

} // namespace attnc::runtime
