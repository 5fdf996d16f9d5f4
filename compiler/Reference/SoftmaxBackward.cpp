#include "Reference/Attention.h"
#include "Reference/RowScores.h"
#include "Reference/ScoreDerivatives.h"

#include <limits>

namespace attnc {
namespace {

// One (b, h)'s share of the gradients, each reduced over heads and batch entries afterwards in
// a fixed order, so the result is the same on any number of threads.
struct HeadShare {
  std::vector<double> query, key, value; // [Tq, d_q], [keys, d_k], [keys, d_v]
  std::map<std::string, std::vector<double>> weights;
  double sink = 0;
  // The kept scores' sites and dL/ds, where the chain reads aux tensors.
  std::vector<std::pair<ScoreSite, double>> scores;
};

// FlashAttention's recipe, in f64 and without tiles. With dP_ij = drop_ij (dO_i . v_j) and
// D_i = sum_j p_ij dP_ij (= dO_i . o_i):
//   dv_j += drop_ij p_ij dO_i,  ds_ij = p_ij (dP_ij - D_i),  d sink = -sum_i p_sink,i D_i
// (the sink is a logit with no value), and ds_ij goes back through score_mod, the modifiers
// and the scale to the variant's raw score (ScoreGradients).
HeadShare headGradients(const KernelTensors& t, const HeadInputs& in, const Array4& dO,
                        const MaskEvaluator& mask, const ScoreDerivatives& derivatives, double sink,
                        int64_t b, int64_t h) {
  const Spec& s = t.spec();
  const int64_t keys = in.k.dims[2], g = h / s.groupSize();
  const ScoreFunction score(t, in, b, h);
  ScoreGradients scoreGradients(score);
  RowScores row(mask, score, b, h, keys, sink);
  HeadShare share;
  share.value.assign(keys * s.dV, 0);
  std::vector<double> probability(keys), weighted(keys);
  // A NaN row's o is NaN, and so is every gradient it reaches.
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  for (int64_t i = 0; i < t.seqQ(); ++i) {
    row.form(i);
    if (row.empty() && !row.special())
      continue;
    const double* dOi = dO.row(b, h, i);
    double rowSum = 0; // D_i
    for (int64_t j = 0; j < keys; ++j) {
      if (!row.kept(j))
        continue;
      const double drop = mask.dropFactor(b, h, i, j);
      const double* v = in.v.row(b, g, j);
      probability[j] = row.special() ? kNaN : row.probability(j);
      double dot = 0;
      for (int64_t e = 0; e < s.dV; ++e) {
        dot += dOi[e] * v[e];
        share.value[j * s.dV + e] += drop * probability[j] * dOi[e];
      }
      weighted[j] = drop * dot; // dP_ij
      rowSum += probability[j] * weighted[j];
    }
    share.sink -= (row.special() ? kNaN : row.sinkProbability()) * rowSum;
    for (int64_t j = 0; j < keys; ++j) {
      if (!row.kept(j))
        continue;
      const double ds = probability[j] * (weighted[j] - rowSum);
      const ScoreSite site{b, h, i, j, row.scaled(j), row.modified(j)};
      const ChainGradients chain = derivatives.chain(site, ds);
      scoreGradients.add(i, j, s.scale * chain.scaled);
      if (derivatives.readsAux())
        share.scores.push_back({site, ds});
    }
  }
  scoreGradients.finish();
  share.query = scoreGradients.query();
  share.key = scoreGradients.key();
  share.weights = scoreGradients.weights();
  return share;
}

} // namespace

AttentionGradients softmaxAttentionBackward(const KernelTensors& t, const HeadInputs& in,
                                            const Array4& dO, const ParallelFor& parallelFor) {
  const Spec& s = t.spec();
  const int64_t B = t.batch(), H = s.heads, keys = in.k.dims[2];
  const MaskEvaluator mask(t);
  const ScoreDerivatives derivatives(mask);
  const std::vector<double> sinks = sinkLogits(t);
  std::vector<HeadShare> shares(B * H);
  parallelFor(B * H, [&](int64_t bh) {
    shares[bh] = headGradients(t, in, dO, mask, derivatives, sinks[bh % H], bh / H, bh % H);
  });

  AttentionGradients r{Array4(B, H, t.seqQ(), s.dQ), Array4(B, s.kvHeads, keys, s.dK),
                       Array4(B, s.kvHeads, keys, s.dV), derivatives.zeroAuxGradients()};
  std::vector<double> sinkGradients(H, 0);
  for (int64_t bh = 0; bh < B * H; ++bh) { // in order: deterministic sums
    const HeadShare& share = shares[bh];
    const int64_t b = bh / H, h = bh % H, g = h / s.groupSize();
    std::copy(share.query.begin(), share.query.end(), r.q.row(b, h, 0));
    for (size_t k = 0; k < share.key.size(); ++k)
      r.k.row(b, g, 0)[k] += share.key[k];
    for (size_t k = 0; k < share.value.size(); ++k)
      r.v.row(b, g, 0)[k] += share.value[k];
    sinkGradients[h] += share.sink;
    for (const auto& [name, part] : share.weights) {
      std::vector<double>& sum = r.arguments[name];
      sum.resize(part.size() * H, 0);
      for (size_t k = 0; k < part.size(); ++k)
        sum[h * part.size() + k] += part[k];
    }
    for (const auto& [site, ds] : share.scores)
      derivatives.addAux(site, ds, derivatives.chain(site, ds), r.arguments);
  }
  if (s.sinks)
    r.arguments["sinks"] = sinkGradients;
  return r;
}

} // namespace attnc
