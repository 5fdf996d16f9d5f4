#include "Reference/ScoreFunction.h"

#include <cmath>

namespace attnc {

ScoreFunction::ScoreFunction(const KernelTensors& t, const HeadInputs& in, int64_t b, int64_t h)
    : spec_(t.spec()), in_(in), b_(b), h_(h), g_(h / t.spec().groupSize()) {
  const Spec& s = spec_;
  const int64_t seqQ = in.q.dims[2], keys = in.k.dims[2];
  if (s.variant == Variant::Additive) {
    const std::vector<double> w1 = t.dense("w1"), w2 = t.dense("w2"), va = t.dense("v_a");
    queryMap_.assign(w1.begin() + h * s.dAttn * s.dQ, w1.begin() + (h + 1) * s.dAttn * s.dQ);
    keyMap_.assign(w2.begin() + h * s.dAttn * s.dK, w2.begin() + (h + 1) * s.dAttn * s.dK);
    queryHidden_ = transform(in.q, b, h, seqQ, s.dQ, queryMap_.data(), s.dAttn);
    keyHidden_ = transform(in.k, b, g_, keys, s.dK, keyMap_.data(), s.dAttn);
    va_.assign(va.begin() + h * s.dAttn, va.begin() + (h + 1) * s.dAttn);
  } else if (s.variant == Variant::Bilinear) {
    // (q^T W)_e = sum_d q_d W[d, e], so W is used transposed as a [d_k, d_q] map.
    const std::vector<double> w = t.dense("w");
    queryMap_.assign(w.begin() + h * s.dQ * s.dK, w.begin() + (h + 1) * s.dQ * s.dK);
    queryHidden_.assign(seqQ * s.dK, 0);
    for (int64_t i = 0; i < seqQ; ++i)
      for (int64_t d = 0; d < s.dQ; ++d)
        for (int64_t e = 0; e < s.dK; ++e)
          queryHidden_[i * s.dK + e] += in.q(b, h, i, d) * queryMap_[d * s.dK + e];
  } else {
    queryRows_ = in.q.row(b, h, 0);
  }
}

double ScoreFunction::operator()(int64_t i, int64_t j) const {
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

std::vector<double> ScoreFunction::transform(const Array4& x, int64_t b, int64_t head, int64_t rows,
                                             int64_t dim, const double* w, int64_t out) {
  std::vector<double> result(rows * out, 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t a = 0; a < out; ++a)
      for (int64_t d = 0; d < dim; ++d)
        result[r * out + a] += w[a * dim + d] * x(b, head, r, d);
  return result;
}

ScoreGradients::ScoreGradients(const ScoreFunction& score) : score_(score) {
  const Spec& s = score.spec_;
  const int64_t seqQ = score.in_.q.dims[2], keys = score.in_.k.dims[2];
  query_.assign(seqQ * s.dQ, 0);
  key_.assign(keys * s.dK, 0);
  if (s.variant == Variant::Additive) {
    queryHidden_.assign(seqQ * s.dAttn, 0);
    keyHidden_.assign(keys * s.dAttn, 0);
    weights_["v_a"].assign(s.dAttn, 0);
  } else if (s.variant == Variant::Bilinear) {
    queryHidden_.assign(seqQ * s.dK, 0);
  }
}

void ScoreGradients::add(int64_t i, int64_t j, double dr) {
  const ScoreFunction& f = score_;
  const Spec& s = f.spec_;
  const double* k = f.in_.k.row(f.b_, f.g_, j);
  if (s.variant == Variant::Additive) {
    // d/d u_a of v_a tanh(u_a + w_a) is v_a (1 - tanh^2), the same for u (W1 q) and w (W2 k).
    std::vector<double>& va = weights_["v_a"];
    for (int64_t a = 0; a < s.dAttn; ++a) {
      const double t = std::tanh(f.queryHidden_[i * s.dAttn + a] + f.keyHidden_[j * s.dAttn + a]);
      va[a] += dr * t;
      const double inner = dr * f.va_[a] * (1 - t * t);
      queryHidden_[i * s.dAttn + a] += inner;
      keyHidden_[j * s.dAttn + a] += inner;
    }
  } else if (s.variant == Variant::Bilinear) {
    for (int64_t e = 0; e < s.dK; ++e) {
      queryHidden_[i * s.dK + e] += dr * k[e];
      key_[j * s.dK + e] += dr * f.queryHidden_[i * s.dK + e];
    }
  } else {
    const double* q = f.queryRows_ + i * s.dK;
    for (int64_t e = 0; e < s.dK; ++e) {
      query_[i * s.dK + e] += dr * k[e];
      key_[j * s.dK + e] += dr * q[e];
    }
  }
}

namespace {

// out [rows, cols] += a [rows, inner] b [inner, cols], all dense.
void addProduct(const std::vector<double>& a, const std::vector<double>& b, int64_t rows,
                int64_t inner, int64_t cols, std::vector<double>& out) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t m = 0; m < inner; ++m)
      for (int64_t c = 0; c < cols; ++c)
        out[r * cols + c] += a[r * inner + m] * b[m * cols + c];
}

std::vector<double> transposed(const std::vector<double>& a, int64_t rows, int64_t cols) {
  std::vector<double> t(a.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      t[c * rows + r] = a[r * cols + c];
  return t;
}

} // namespace

void ScoreGradients::finish() {
  const ScoreFunction& f = score_;
  const Spec& s = f.spec_;
  const int64_t seqQ = f.in_.q.dims[2], keys = f.in_.k.dims[2];
  auto rowsOf = [&](const Array4& x, int64_t head, int64_t rows, int64_t dim) {
    return std::vector<double>(x.row(f.b_, head, 0), x.row(f.b_, head, 0) + rows * dim);
  };
  if (s.variant == Variant::Additive) {
    // u = W1 q: dq = W1^T du, dW1 = du q^T (and the same for w = W2 k).
    addProduct(queryHidden_, f.queryMap_, seqQ, s.dAttn, s.dQ, query_);
    addProduct(keyHidden_, f.keyMap_, keys, s.dAttn, s.dK, key_);
    std::vector<double>& w1 = weights_["w1"];
    std::vector<double>& w2 = weights_["w2"];
    w1.assign(s.dAttn * s.dQ, 0);
    w2.assign(s.dAttn * s.dK, 0);
    addProduct(transposed(queryHidden_, seqQ, s.dAttn), rowsOf(f.in_.q, f.h_, seqQ, s.dQ), s.dAttn,
               seqQ, s.dQ, w1);
    addProduct(transposed(keyHidden_, keys, s.dAttn), rowsOf(f.in_.k, f.g_, keys, s.dK), s.dAttn,
               keys, s.dK, w2);
  } else if (s.variant == Variant::Bilinear) {
    // e = q W: dq = de W^T, dW = q^T de.
    addProduct(queryHidden_, transposed(f.queryMap_, s.dQ, s.dK), seqQ, s.dK, s.dQ, query_);
    std::vector<double>& w = weights_["w"];
    w.assign(s.dQ * s.dK, 0);
    addProduct(transposed(rowsOf(f.in_.q, f.h_, seqQ, s.dQ), seqQ, s.dQ), queryHidden_, s.dQ, seqQ,
               s.dK, w);
  }
}

} // namespace attnc
