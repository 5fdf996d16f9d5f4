// A variant's raw score of one (b, h) before scale and modifiers, r_ij = q.k, v_a.tanh(W1 q +
// W2 k) or q^T W k, and its gradients: what dL/dr_ij contributes to q, k and the variant's
// weights.
#ifndef ATTNC_COMPILER_REFERENCE_SCOREFUNCTION_H
#define ATTNC_COMPILER_REFERENCE_SCOREFUNCTION_H

#include "Reference/HeadInputs.h"

#include <map>
#include <string>

namespace attnc {

class ScoreFunction {
public:
  ScoreFunction(const KernelTensors& tensors, const HeadInputs& in, int64_t b, int64_t h);

  double operator()(int64_t i, int64_t j) const;

private:
  friend class ScoreGradients;
  // rows of x[b, head] (each of size dim) mapped by W [out, dim]: result [rows, out].
  static std::vector<double> transform(const Array4& x, int64_t b, int64_t head, int64_t rows,
                                       int64_t dim, const double* w, int64_t out);

  const Spec& spec_;
  const HeadInputs& in_;
  int64_t b_, h_, g_;
  const double* queryRows_ = nullptr;
  std::vector<double> queryHidden_, keyHidden_, va_;
  std::vector<double> queryMap_, keyMap_; // this head's W1 and W2, or bilinear's W
};

// The gradients one (b, h)'s scores give: dL/dq of its rows, dL/dk of its KV head's keys (this
// head's share, which GQA sums over the group), and its share of the variant's weights.
class ScoreGradients {
public:
  explicit ScoreGradients(const ScoreFunction& score);

  // Adds dL/dr_ij times r_ij's derivatives.
  void add(int64_t i, int64_t j, double scoreGradient);
  // After every add: the gradients, q's [Tq, d_q], k's [keys, d_k], and the weights' by
  // argument name, each this head's slice (w1, w2, v_a, w: [d_attn, d_q], [d_attn, d_k],
  // [d_attn], [d_q, d_k]).
  void finish();
  const std::vector<double>& query() const { return query_; }
  const std::vector<double>& key() const { return key_; }
  const std::map<std::string, std::vector<double>>& weights() const { return weights_; }

private:
  const ScoreFunction& score_;
  std::vector<double> query_, key_, queryHidden_, keyHidden_;
  std::map<std::string, std::vector<double>> weights_;
};

} // namespace attnc

#endif // ATTNC_COMPILER_REFERENCE_SCOREFUNCTION_H
