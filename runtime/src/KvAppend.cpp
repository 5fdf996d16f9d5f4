#include "KvAppend.h"

#include "attnc/DType.hpp"
#include "attnc/Float16.hpp"
#include "attnc/QuantizedRows.hpp"
#include "attnc/Rope.hpp"
#include "attnc/TensorSpan.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>

namespace attnc::runtime {
namespace {

// A tensor and its element strides (elementStrides), formed once per call.
struct Strided {
  explicit Strided(const DLTensor* t)
      : tensor(t), strides(t ? elementStrides(*t) : std::vector<int64_t>()) {}
  const DLTensor* tensor;
  std::vector<int64_t> strides;
  // The element offset of `index`.
  int64_t at(std::initializer_list<int64_t> index) const {
    int64_t offset = 0;
    size_t d = 0;
    for (int64_t i : index)
      offset += i * strides[d++];
    return offset;
  }
};

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
  if (t.dtype.code == kDLInt) { // an int8 cache's code, in [-127, 127] (quantizeRow)
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
    Strided rows, cache, scale; // scale: a quantized cache's, else null
    bool rotated;
  };
  auto named = [&](const char* name) { return Strided(argumentNamed(manifest, tensors, name)); };
  const Part parts[] = {
      {named("k_new"), named(paged ? "k_pages" : "k"), named("k_scale"), a.ropeDims > 0},
      {named("v_new"), named(paged ? "v_pages" : "v"), named("v_scale"), false}};
  const DLTensor& keys = *parts[0].rows.tensor;
  const bool packed = a.rowsOrder == "packed", rowsBshd = a.rowsOrder == "bshd";
  // The cache's and its scales' index order: [outer, row, g], else [outer, g, row].
  const bool rowFirst = a.order == "bshd" || a.order == "nhd";
  const int64_t kvHeads = rowsBshd ? keys.shape[2] : keys.shape[1];
  const int64_t pageSize = !paged ? 0 : parts[0].cache.tensor->shape[a.order == "nhd" ? 1 : 2];
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
          const DLTensor &rows = *part.rows.tensor, &stored = *part.cache.tensor;
          const int64_t dim = rows.shape[rows.ndim - 1];
          // Element e of the new row is at source + e * sourceStride, of its cache row at
          // target + e * targetStride; the scale (a quantized cache's) at the row's index
          // without e.
          const int64_t source = packed     ? part.rows.at({offsets[b] + i, g, 0})
                                 : rowsBshd ? part.rows.at({b, i, g, 0})
                                            : part.rows.at({b, g, i, 0});
          const int64_t target = rowFirst ? part.cache.at({outer, row, g, 0})
                                          : part.cache.at({outer, g, row, 0});
          const int64_t sourceStride = part.rows.strides.back();
          const int64_t targetStride = part.cache.strides.back();
          if (!part.rotated && !part.scale.tensor && sameDType(rows.dtype, stored.dtype)) {
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
          if (part.scale.tensor) // a u8 cache is an fp8_e4m3 one, an i8 cache an int8 one
            writeElement(*part.scale.tensor,
                         rowFirst ? part.scale.at({outer, row, g}) : part.scale.at({outer, g, row}),
                         quantizeRow(x, stored.dtype.code == kDLUInt ? RowCode::E4m3
                                                                     : RowCode::Int8));
          for (int64_t e = 0; e < dim; ++e)
            writeElement(stored, target + e * targetStride, x[e]);
        }
    }
  return std::nullopt;
}

} // namespace attnc::runtime
