#include "Reference/InputGradients.h"

#include "Semantics/Positions.h"

namespace attnc {
namespace {

// K~ = E K over each batch's valid keys (HeadInputs' projectSequence): dK = E^T dK~ on those
// keys, and dE[g, p, j] = sum_b dK~[b, g, p] . K[b, g, j].
Array4 projectSequenceBack(const Array4& projectedGradient, const Array4& x,
                           const std::vector<double>& e, const std::vector<int64_t>& lengths,
                           std::vector<double>& eGradient) {
  const int64_t batch = x.dims[0], groups = x.dims[1], seq = x.dims[2], dim = x.dims[3];
  const int64_t projLen = projectedGradient.dims[2];
  Array4 gradient(batch, groups, seq, dim);
  eGradient.assign(e.size(), 0);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t p = 0; p < projLen; ++p)
        for (int64_t j = 0; j < lengths[b]; ++j) {
          const double weight = e[(g * projLen + p) * seq + j];
          double dot = 0;
          for (int64_t d = 0; d < dim; ++d) {
            gradient(b, g, j, d) += weight * projectedGradient(b, g, p, d);
            dot += projectedGradient(b, g, p, d) * x(b, g, j, d);
          }
          eGradient[(g * projLen + p) * seq + j] += dot;
        }
  return gradient;
}

// Q = x W split into heads (HeadInputs' projectToHeads): dx = dQ W^T, dW = x^T dQ, with x
// [B, T, d_model] and W [d_model, heads * dim].
void projectToHeadsBack(const Array4& headGradient, const std::vector<double>& x,
                        const std::vector<double>& w, int64_t dModel,
                        std::vector<double>& xGradient, std::vector<double>& wGradient,
                        const ParallelFor& parallelFor) {
  const int64_t batch = headGradient.dims[0], heads = headGradient.dims[1];
  const int64_t seq = headGradient.dims[2], dim = headGradient.dims[3], columns = heads * dim;
  xGradient.assign(batch * seq * dModel, 0);
  parallelFor(batch * seq, [&](int64_t bt) {
    const int64_t b = bt / seq, t = bt % seq;
    for (int64_t m = 0; m < dModel; ++m)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t e = 0; e < dim; ++e)
          xGradient[bt * dModel + m] += headGradient(b, h, t, e) * w[m * columns + h * dim + e];
  });
  wGradient.assign(dModel * columns, 0);
  parallelFor(dModel, [&](int64_t m) { // a row of W's gradient per body: fixed order sums
    for (int64_t bt = 0; bt < batch * seq; ++bt)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t e = 0; e < dim; ++e)
          wGradient[m * columns + h * dim + e] +=
              x[bt * dModel + m] * headGradient(bt / seq, h, bt % seq, e);
  });
}

} // namespace

void addInputGradients(const KernelTensors& t, AttentionGradients& g,
                       const ParallelFor& parallelFor) {
  const Spec& s = t.spec();
  std::map<std::string, std::vector<double>>& out = g.arguments;
  if (s.variant == Variant::Linformer) {
    const std::vector<int64_t> lengths = keyLengths(t);
    g.k = projectSequenceBack(g.k, t.headMajor("k"), t.dense("e"), lengths, out["e"]);
    g.v = projectSequenceBack(g.v, t.headMajor("v"), t.dense("f"), lengths, out["f"]);
  }
  if (s.rope) {
    // R(pos) is orthogonal: a rotated row's gradient rotates back by R(pos)^T = R(-pos).
    const int64_t offset = positions::alignmentOffset(s, t.seqQ(), t.seqK());
    applyRopeToAll(g.q, std::vector<int64_t>(t.batch(), offset), s, /*transposed=*/true);
    applyRopeToAll(g.k, std::vector<int64_t>(t.batch(), 0), s, /*transposed=*/true);
  }
  if (s.variant == Variant::Mha)
    for (auto [name, heads] : {std::pair{"q", &g.q}, std::pair{"k", &g.k}, std::pair{"v", &g.v}})
      projectToHeadsBack(*heads, mhaInput(t, name), t.dense(std::string("w_") + name), s.dModel,
                         out[name], out[std::string("w_") + name], parallelFor);
}

} // namespace attnc
