#include "Reference/HeadInputs.h"

#include "Semantics/Positions.h"
#include "Support/Errors.h"
#include "attnc/Float16.hpp"
#include "attnc/QuantizedRows.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>

namespace attnc {
namespace {

// x [B, T, d_model] (dense) times W [d_model, heads * dim], split into [B, heads, T, dim].
Array4 projectToHeads(const std::vector<double>& x, int64_t batch, int64_t seq, int64_t dModel,
                      const std::vector<double>& w, int64_t heads, int64_t dim,
                      const ParallelFor& parallelFor) {
  Array4 out(batch, heads, seq, dim);
  parallelFor(batch * seq, [&](int64_t bt) {
    int64_t b = bt / seq, t = bt % seq;
    const double* xr = &x[bt * dModel];
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t e = 0; e < dim; ++e) {
        double sum = 0;
        for (int64_t m = 0; m < dModel; ++m)
          sum += xr[m] * w[m * heads * dim + h * dim + e];
        out(b, h, t, e) = sum;
      }
  });
  return out;
}

// Adds PE(position, :) to x [B, T, d_model]; row t sits at position t + offset.
void addSinusoidal(std::vector<double>& x, int64_t batch, int64_t seq, int64_t dModel,
                   int64_t offset) {
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seq; ++t)
      for (int64_t m = 0; m < dModel; ++m)
        x[(b * seq + t) * dModel + m] += positions::sinusoidal(t + offset, m, dModel);
}

// E [H_kv, proj_len, Tk] applied along the sequence: out[b, g, p] = sum_{j < len_b} E[g, p, j] x[b,
// g, j].
Array4 projectSequence(const Array4& x, const std::vector<double>& e, int64_t projLen,
                       const std::vector<int64_t>& lengths) {
  const int64_t batch = x.dims[0], groups = x.dims[1], seq = x.dims[2], dim = x.dims[3];
  Array4 out(batch, groups, projLen, dim);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t p = 0; p < projLen; ++p)
        for (int64_t j = 0; j < lengths[b]; ++j) {
          double weight = e[(g * projLen + p) * seq + j];
          for (int64_t d = 0; d < dim; ++d)
            out(b, g, p, d) += weight * x(b, g, j, d);
        }
  return out;
}

// What a quantized cache's elements hold.
RowCode rowCode(const Spec& s) {
  return s.kvDtype == KvDType::Fp8E4m3 ? RowCode::E4m3 : RowCode::Int8;
}

// A cache element as the number it stands for before its row's scale: an fp8_e4m3 cache's byte
// decoded, an int8 cache's or an unquantized one's value as read.
double cachedValue(const Spec& s, double element) {
  return s.kvDtype == KvDType::Same ? element : codeValue(element, rowCode(s));
}

// A paged cache's keys or values as [B, H_kv, Tk, d]: position j of sequence b is row j % P
// (P = page_size) of page block_table[b, j / P], in either page layout, times its scale in
// `scales` (a quantized cache's k_scale or v_scale; "" for none), for j < seq_lens[b]; later
// positions stay 0 and their block table entries are not read. The runtime refused a length
// or a page out of range before the kernel ran; the reference checks again, as it would read
// out of bounds otherwise.
Array4 gatherPages(const KernelTensors& t, std::string_view name, std::string_view scales,
                   int64_t dim) {
  const Spec& s = t.spec();
  const DLTensor& pages = t.tensor(name);
  const std::vector<double> values = t.dense(name), lengths = t.dense("seq_lens"),
                            table = t.dense("block_table"),
                            scale = scales.empty() ? std::vector<double>() : t.dense(scales);
  const int64_t pageCount = pages.shape[0], perSequence = t.seqK() / s.pageSize;
  Array4 out(t.batch(), s.kvHeads, t.seqK(), dim);
  for (int64_t b = 0; b < t.batch(); ++b) {
    const auto length = static_cast<int64_t>(lengths[b]);
    if (length < 0 || length > t.seqK())
      throw JobError("seq_lens[" + std::to_string(b) + "] = " + std::to_string(length) +
                     " is outside [0, Tk=" + std::to_string(t.seqK()) + "]");
    for (int64_t j = 0; j < length; ++j) {
      const auto page = static_cast<int64_t>(table[b * perSequence + j / s.pageSize]);
      if (page < 0 || page >= pageCount)
        throw JobError("block_table[" + std::to_string(b) + ", " +
                       std::to_string(j / s.pageSize) + "] = " + std::to_string(page) +
                       " names no page of " + std::string(name));
      for (int64_t g = 0; g < s.kvHeads; ++g) {
        const int64_t row = s.pageLayout == PageLayout::Nhd
                                ? (page * s.pageSize + j % s.pageSize) * s.kvHeads + g
                                : (page * s.kvHeads + g) * s.pageSize + j % s.pageSize;
        const double factor = scale.empty() ? 1.0 : scale[row];
        for (int64_t e = 0; e < dim; ++e)
          out(b, g, j, e) = factor * cachedValue(s, values[row * dim + e]);
      }
    }
  }
  return out;
}

// A quantized contiguous cache's rows [B, H_kv, Tk, d] decoded and times their scales,
// [B, H_kv, Tk] (bhsd) or [B, Tk, H_kv] (bshd) dense.
void dequantize(Array4& rows, const std::vector<double>& scale, const Spec& s) {
  const int64_t heads = rows.dims[1], seq = rows.dims[2], dim = rows.dims[3];
  for (int64_t b = 0; b < rows.dims[0]; ++b)
    for (int64_t g = 0; g < heads; ++g)
      for (int64_t j = 0; j < seq; ++j) {
        const double factor = scale[s.layout == Layout::Bhsd ? (b * heads + g) * seq + j
                                                             : (b * seq + j) * heads + g];
        double* row = rows.row(b, g, j);
        for (int64_t e = 0; e < dim; ++e)
          row[e] = factor * cachedValue(s, row[e]);
      }
}

// kv_append: positions [n_b - Tq, n_b) of sequence b (n_b = seq_lens[b]) hold k_new's and
// v_new's rows as the call writes them: the keys rotated there by RoPE (a cache's keys are
// stored rotated), every row rounded to the cache's elements: the spec's dtype, or a quantized
// cache's codes times their scale (attnc/QuantizedRows.hpp).
void appendNewRows(const KernelTensors& t, HeadInputs& in) {
  const Spec& s = t.spec();
  const Array4 keys = t.headMajor("k_new"), values = t.headMajor("v_new");
  const std::vector<double> lengths = t.dense("seq_lens");
  auto stored = [&](double x) {
    switch (s.dtype) {
    case DType::F16: return halfToDouble(doubleToHalf(x));
    case DType::BF16: return bfloat16ToDouble(doubleToBfloat16(x));
    default: return static_cast<double>(static_cast<float>(x));
    }
  };
  for (int64_t b = 0; b < t.batch(); ++b) {
    const auto n = static_cast<int64_t>(lengths[b]);
    if (n < t.seqQ())
      throw JobError("seq_lens[" + std::to_string(b) + "] = " + std::to_string(n) +
                     " is less than the " + std::to_string(t.seqQ()) + " new rows of kv_append");
    for (int64_t g = 0; g < s.kvHeads; ++g)
      for (int64_t i = 0; i < t.seqQ(); ++i) {
        const int64_t position = n - t.seqQ() + i;
        for (auto [from, to] : {std::pair{&keys, &in.k}, std::pair{&values, &in.v}}) {
          const int64_t dim = from->dims[3];
          std::vector<double> x(from->row(b, g, i), from->row(b, g, i) + dim);
          if (from == &keys && s.rope)
            positions::applyRope(x.data(), position, s.ropeDims, s.ropeTheta, s.ropeStyle);
          if (s.kvDtype != KvDType::Same) {
            const RowCode code = rowCode(s);
            const double scale = quantizeRow(x, code);
            for (double& v : x)
              v = scale * codeValue(v, code);
          } else {
            for (double& v : x)
              v = stored(v);
          }
          std::copy(x.begin(), x.end(), to->row(b, g, position));
        }
      }
  }
}

// mha's projections Q = x_q W_Q, K = x_k W_K, V = x_v W_V split into heads (the positional
// encoding added to the inputs first where the spec asks), before any RoPE.
HeadInputs mhaProjections(const KernelTensors& t, const ParallelFor& parallelFor) {
  const Spec& s = t.spec();
  HeadInputs in;
  in.q = projectToHeads(mhaInput(t, "q"), t.batch(), t.seqQ(), s.dModel, t.dense("w_q"), s.heads,
                        s.dK, parallelFor);
  in.k = projectToHeads(mhaInput(t, "k"), t.batch(), t.seqK(), s.dModel, t.dense("w_k"), s.kvHeads,
                        s.dK, parallelFor);
  in.v = projectToHeads(mhaInput(t, "v"), t.batch(), t.seqK(), s.dModel, t.dense("w_v"), s.kvHeads,
                        s.dV, parallelFor);
  return in;
}

} // namespace

void applyRopeToAll(Array4& x, const std::vector<int64_t>& offsets, const Spec& s,
                    bool transposed) {
  for (int64_t b = 0; b < x.dims[0]; ++b)
    for (int64_t h = 0; h < x.dims[1]; ++h)
      for (int64_t t = 0; t < x.dims[2]; ++t) {
        const int64_t position = t + offsets[b];
        positions::applyRope(x.row(b, h, t), transposed ? -position : position, s.ropeDims,
                             s.ropeTheta, s.ropeStyle);
      }
}

std::vector<double> mhaInput(const KernelTensors& t, std::string_view name) {
  const Spec& s = t.spec();
  std::vector<double> x = t.dense(name);
  if (s.pe == PositionalEncoding::Sinusoidal) {
    const bool queries = name == "q";
    addSinusoidal(x, t.batch(), queries ? t.seqQ() : t.seqK(), s.dModel,
                  queries ? positions::alignmentOffset(s, t.seqQ(), t.seqK()) : 0);
  }
  return x;
}

std::vector<int64_t> keyLengths(const KernelTensors& t) {
  if (!t.spec().masks.has(MaskKind::Padding))
    return std::vector<int64_t>(t.batch(), t.seqK());
  std::vector<int64_t> lengths;
  for (double length : t.dense("lengths"))
    lengths.push_back(std::clamp<int64_t>(static_cast<int64_t>(length), 0, t.seqK()));
  return lengths;
}

std::vector<double> headsSideBySide(const Array4& x) {
  const int64_t batch = x.dims[0], heads = x.dims[1], seq = x.dims[2], dim = x.dims[3];
  std::vector<double> rows(batch * seq * heads * dim);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t t = 0; t < seq; ++t)
        std::copy_n(x.row(b, h, t), dim, &rows[((b * seq + t) * heads + h) * dim]);
  return rows;
}

HeadInputs prepareHeadInputs(const KernelTensors& t, const ParallelFor& parallelFor,
                             HeadInputs* projections) {
  const Spec& s = t.spec();
  const int64_t offset = positions::alignmentOffset(s, t.seqQ(), t.seqK());
  HeadInputs in;
  if (s.variant == Variant::Mha) {
    in = mhaProjections(t, parallelFor);
    if (projections)
      *projections = in;
  } else if (s.kvCache == KvCache::Paged) {
    in.q = t.headMajor("q");
    const bool quantized = s.kvDtype != KvDType::Same;
    in.k = gatherPages(t, "k_pages", quantized ? "k_scale" : "", s.dK);
    in.v = gatherPages(t, "v_pages", quantized ? "v_scale" : "", s.dV);
  } else {
    in.q = t.headMajor("q");
    in.k = t.headMajor("k");
    in.v = t.headMajor("v");
    if (s.kvDtype != KvDType::Same) {
      dequantize(in.k, t.dense("k_scale"), s);
      dequantize(in.v, t.dense("v_scale"), s);
    }
  }
  if (s.kvAppend)
    appendNewRows(t, in);
  if (s.rope && s.cached()) {
    // A cache holds its keys rotated already (docs/spec.md, "KV caches"): only the queries
    // rotate, at their positions at the end of each sequence.
    std::vector<int64_t> offsets;
    for (double length : t.dense("seq_lens"))
      offsets.push_back(static_cast<int64_t>(length) - t.seqQ());
    applyRopeToAll(in.q, offsets, s);
  } else if (s.rope) {
    applyRopeToAll(in.q, std::vector<int64_t>(t.batch(), offset), s);
    applyRopeToAll(in.k, std::vector<int64_t>(t.batch(), 0), s);
  }
  if (s.variant == Variant::Linformer) {
    std::vector<int64_t> lengths = keyLengths(t);
    in.k = projectSequence(in.k, t.dense("e"), s.projLen, lengths);
    in.v = projectSequence(in.v, t.dense("f"), s.projLen, lengths);
  }
  return in;
}

} // namespace attnc
