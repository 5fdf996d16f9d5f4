#include "Reference/Attention.h"
#include "Reference/FeatureMap.h"
#include "Reference/MaskEvaluator.h"

#include <algorithm>
#include <cmath>

namespace attnc {

AttentionResult linearAttention(const KernelTensors& t, const HeadInputs& in,
                                const ParallelFor& parallelFor) {
  const Spec& s = t.spec();
  const int64_t B = t.batch(), H = s.heads, seqQ = t.seqQ(), seqK = t.seqK();
  const int64_t dv = s.dV;
  const MaskEvaluator mask(t);
  const std::vector<int64_t> lengths = keyLengths(t);
  const FeatureMapper phi(t);
  const int64_t m = phi.size();
  const bool causal = s.masks.has(MaskKind::Causal);

  AttentionResult r;
  r.o = Array4(B, H, seqQ, dv);
  if (s.weights)
    r.weights.assign(B * H * seqQ * seqK, 0);

  parallelFor(B * H, [&](int64_t bh) {
    const int64_t b = bh / H, h = bh % H, g = h / s.groupSize();
    const int64_t valid = lengths[b];
    std::vector<double> phiK(seqK * m);
    for (int64_t j = 0; j < valid; ++j)
      phi(in.k.row(b, g, j), &phiK[j * m]);
    // Running sums over the first `added` keys: S = sum_j phi(k_j) v_j^T, z = sum_j phi(k_j).
    // Rows go in order and the keys a row sees, `seen`, never shrink from one row to the next,
    // so each key is added once (the prefix sums of causal linear attention).
    std::vector<double> sumS(m * dv, 0), sumZ(m, 0), phiQ(m);
    int64_t added = 0;
    for (int64_t i = 0; i < seqQ; ++i) {
      const int64_t seen = causal ? std::clamp<int64_t>(i + mask.offset() + 1, 0, valid) : valid;
      for (; added < seen; ++added) {
        const double* v = in.v.row(b, g, added);
        for (int64_t f = 0; f < m; ++f) {
          const double feature = phiK[added * m + f];
          sumZ[f] += feature;
          for (int64_t e = 0; e < dv; ++e)
            sumS[f * dv + e] += feature * v[e];
        }
      }
      phi(in.q.row(b, h, i), phiQ.data());
      double denominator = 0;
      for (int64_t f = 0; f < m; ++f)
        denominator += phiQ[f] * sumZ[f];
      if (denominator == 0)
        continue; // no key, or features all zero: o = 0
      double* o = r.o.row(b, h, i);
      for (int64_t f = 0; f < m; ++f)
        for (int64_t e = 0; e < dv; ++e)
          o[e] += phiQ[f] * sumS[f * dv + e] / denominator;
      if (s.weights)
        for (int64_t j = 0; j < seen; ++j) {
          double a = 0;
          for (int64_t f = 0; f < m; ++f)
            a += phiQ[f] * phiK[j * m + f];
          r.weights[((b * H + h) * seqQ + i) * seqK + j] = a / denominator;
        }
    }
  });
  return r;
}

} // namespace attnc
