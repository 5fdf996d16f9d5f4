#include "Reference/Attention.h"
#include "Reference/MaskEvaluator.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace attnc {
namespace {

// Raw scores of one (b, h) before scale and modifiers: q.k, v_a.tanh(W1 q + W2 k) or q^T W k.
class ScoreFunction {
public:
  ScoreFunction(const KernelTensors& t, const HeadInputs& in, int64_t b, int64_t h)
      : spec_(t.spec()), in_(in), b_(b), g_(h / t.spec().groupSize()) {
    const Spec& s = spec_;
    const int64_t seqQ = in.q.dims[2], keys = in.k.dims[2];
    if (s.variant == Variant::Additive) {
      std::vector<double> w1 = t.dense("w1"), w2 = t.dense("w2"), va = t.dense("v_a");
      queryHidden_ = transform(in.q, b, h, seqQ, s.dQ, &w1[h * s.dAttn * s.dQ], s.dAttn);
      keyHidden_ = transform(in.k, b, g_, keys, s.dK, &w2[h * s.dAttn * s.dK], s.dAttn);
      va_.assign(va.begin() + h * s.dAttn, va.begin() + (h + 1) * s.dAttn);
    } else if (s.variant == Variant::Bilinear) {
      // (q^T W)_e = sum_d q_d W[d, e], so W is used transposed as a [d_k, d_q] map.
      std::vector<double> w = t.dense("w");
      queryHidden_.assign(seqQ * s.dK, 0);
      for (int64_t i = 0; i < seqQ; ++i)
        for (int64_t d = 0; d < s.dQ; ++d)
          for (int64_t e = 0; e < s.dK; ++e)
            queryHidden_[i * s.dK + e] += in.q(b, h, i, d) * w[(h * s.dQ + d) * s.dK + e];
    } else {
      queryRows_ = in.q.row(b, h, 0);
    }
  }

  double operator()(int64_t i, int64_t j) const {
    const Spec& s = spec_;
    const double* k = in_.k.row(b_, g_, j);
    double sum = 0;
    if (s.variant == Variant::Additive) {
      for (int64_t a = 0; a < s.dAttn; ++a)
        sum += va_[a] * std::tanh(queryHidden_[i * s.dAttn + a] + keyHidden_[j * s.dAttn + a]);
    } else if (s.variant == Variant::Bilinear) {
      for (int64_t e = 0; e < s.dK; ++e)
        sum += queryHidden_[i * s.dK + e] * k[e];
    } else {
      const double* q = queryRows_ + i * s.dK;
      for (int64_t e = 0; e < s.dK; ++e)
        sum += q[e] * k[e];
    }
    return sum;
  }

private:
  // rows of x[b, head] (each of size dim) mapped by W [out, dim]: result [rows, out].
  static std::vector<double> transform(const Array4& x, int64_t b, int64_t head, int64_t rows,
                                       int64_t dim, const double* w, int64_t out) {
    std::vector<double> result(rows * out, 0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t a = 0; a < out; ++a)
        for (int64_t d = 0; d < dim; ++d)
          result[r * out + a] += w[a * dim + d] * x(b, head, r, d);
    return result;
  }

  const Spec& spec_;
  const HeadInputs& in_;
  int64_t b_, g_;
  const double* queryRows_ = nullptr;
  std::vector<double> queryHidden_, keyHidden_, va_;
};

} // namespace

AttentionResult softmaxAttention(const KernelTensors& t, const HeadInputs& in,
                                 const ParallelFor& parallelFor) {
  const Spec& s = t.spec();
  const int64_t B = t.batch(), H = s.heads, seqQ = t.seqQ(), keys = in.k.dims[2];
  // Linformer's padding acts in its projections, so its mask keeps every projected key unless
  // the batch has no valid key (Spec/BuiltinExpressions.cpp, the one definition).
  const MaskEvaluator mask(t);
  const std::vector<double> sinks = s.sinks ? t.dense("sinks") : std::vector<double>();
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  // Every kernel forms scores in f32 (as PyTorch does for f32 inputs): one past its range is
  // infinite there, and so it is here.
  constexpr double kMaxScore = std::numeric_limits<float>::max();

  AttentionResult r;
  r.o = Array4(B, H, seqQ, s.dV);
  if (s.lse)
    r.lse.assign(B * H * seqQ, kNegInf);
  if (s.weights)
    r.weights.assign(B * H * seqQ * keys, 0);

  parallelFor(B * H, [&](int64_t bh) {
    const int64_t b = bh / H, h = bh % H, g = h / s.groupSize();
    const ScoreFunction score(t, in, b, h);
    std::vector<double> row(keys);
    std::vector<char> kept(keys);
    // The sink joins every row as one more logit whose value is 0: in the max, the special
    // values and the denominator, but in no weight and no product with v.
    const double sink = s.sinks ? sinks[h] : kNegInf;
    for (int64_t i = 0; i < seqQ; ++i) {
      double rowMax = sink;
      bool rowNaN = std::isnan(sink);
      for (int64_t j = 0; j < keys; ++j) {
        kept[j] = mask.allowed(b, h, i, j);
        if (!kept[j])
          continue;
        double x = s.scale * score(i, j);
        if (std::fabs(x) > kMaxScore)
          x = std::copysign(std::numeric_limits<double>::infinity(), x);
        x = mask.modified(b, h, i, j, x);
        if (mask.hasScoreMod()) {
          x = mask.scoreModded(b, h, i, j, x);
          if (std::fabs(x) > kMaxScore)
            x = std::copysign(std::numeric_limits<double>::infinity(), x);
        }
        row[j] = x;
        rowMax = std::max(rowMax, x);
        rowNaN = rowNaN || std::isnan(x);
      }
      // Special values as in PyTorch's math path, for the keys the row keeps (a masked key is
      // absent, whatever its values): a NaN score, or a +inf one (softmax's inf - inf), makes
      // the row's weights, o and lse NaN; NaN or inf in a kept value reaches o through p v.
      if (rowNaN || rowMax == std::numeric_limits<double>::infinity()) {
        double* o = r.o.row(b, h, i);
        std::fill(o, o + s.dV, kNaN);
        if (s.lse)
          r.lse[(b * H + h) * seqQ + i] = kNaN;
        if (s.weights)
          for (int64_t j = 0; j < keys; ++j)
            if (kept[j])
              r.weights[((b * H + h) * seqQ + i) * keys + j] = kNaN;
        continue;
      }
      if (rowMax == kNegInf)
        continue; // no kept key and no sink: o = 0, lse = -inf, weights = 0
      // With L = exp(sink - m) + sum_j exp(s_j - m) in [1, keys + 1]: lse = m + log L and
      // p_j = exp(s_j - m) / L. Not p_j = exp(s_j - lse): where |m| dwarfs log L (m = -1e20,
      // a score_mod's constant shift or a -1e30 mask value), m + log L rounds to m and every
      // p_j to exp(s_j - m), weights that no longer sum to one.
      double sum = std::exp(sink - rowMax);
      for (int64_t j = 0; j < keys; ++j)
        if (kept[j])
          sum += std::exp(row[j] - rowMax);
      const double lse = rowMax + std::log(sum);
      double* o = r.o.row(b, h, i);
      for (int64_t j = 0; j < keys; ++j) {
        if (!kept[j])
          continue;
        double p = std::exp(row[j] - rowMax) / sum;
        if (s.weights)
          r.weights[((b * H + h) * seqQ + i) * keys + j] = p;
        p *= mask.dropFactor(b, h, i, j);
        const double* v = in.v.row(b, g, j);
        for (int64_t e = 0; e < s.dV; ++e)
          o[e] += p * v[e];
      }
      if (s.lse)
        r.lse[(b * H + h) * seqQ + i] = lse;
    }
  });
  return r;
}

} // namespace attnc
