#include "Reference/Attention.h"
#include "Reference/RowScores.h"

#include <algorithm>
#include <limits>

namespace attnc {

std::vector<double> sinkLogits(const KernelTensors& t) {
  const Spec& s = t.spec();
  return s.sinks ? t.dense("sinks")
                 : std::vector<double>(s.heads, -std::numeric_limits<double>::infinity());
}

AttentionResult softmaxAttention(const KernelTensors& t, const HeadInputs& in,
                                 const ParallelFor& parallelFor) {
  const Spec& s = t.spec();
  const int64_t B = t.batch(), H = s.heads, seqQ = t.seqQ(), keys = in.k.dims[2];
  // Linformer's padding acts in its projections, so its mask keeps every projected key unless
  // the batch has no valid key (Spec/BuiltinExpressions.cpp, the one definition).
  const MaskEvaluator mask(t);
  const std::vector<double> sinks = sinkLogits(t);
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

  AttentionResult r;
  r.o = Array4(B, H, seqQ, s.dV);
  if (s.lse)
    r.lse.assign(B * H * seqQ, -std::numeric_limits<double>::infinity());
  if (s.weights)
    r.weights.assign(B * H * seqQ * keys, 0);

  parallelFor(B * H, [&](int64_t bh) {
    const int64_t b = bh / H, h = bh % H, g = h / s.groupSize();
    const ScoreFunction score(t, in, b, h);
    RowScores row(mask, score, b, h, keys, sinks[h]);
    for (int64_t i = 0; i < seqQ; ++i) {
      row.form(i);
      double* o = r.o.row(b, h, i);
      double* weights = s.weights ? &r.weights[((b * H + h) * seqQ + i) * keys] : nullptr;
      // A masked key is absent, whatever its values; NaN or inf in a kept value reaches o
      // through p v.
      if (row.special()) {
        std::fill(o, o + s.dV, kNaN);
        if (s.lse)
          r.lse[(b * H + h) * seqQ + i] = kNaN;
        for (int64_t j = 0; weights && j < keys; ++j)
          if (row.kept(j))
            weights[j] = kNaN;
        continue;
      }
      if (row.empty())
        continue;
      for (int64_t j = 0; j < keys; ++j) {
        if (!row.kept(j))
          continue;
        double p = row.probability(j);
        if (weights)
          weights[j] = p;
        p *= mask.dropFactor(b, h, i, j);
        const double* v = in.v.row(b, g, j);
        for (int64_t e = 0; e < s.dV; ++e)
          o[e] += p * v[e];
      }
      if (s.lse)
        r.lse[(b * H + h) * seqQ + i] = row.lse();
    }
  });
  return r;
}

} // namespace attnc
