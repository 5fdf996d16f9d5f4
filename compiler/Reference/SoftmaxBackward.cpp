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
  // Where the chain reads aux tensors: each kept score's site, dL/ds and chain gradients.
  struct Score {
    ScoreSite site;
    double gradient;
    ChainGradients chain;
  };
  std::vector<Score> scores;
};

// FlashAttention's recipe for one (b, h), in f64 and without tiles. With
// dP_ij = drop_ij (dO_i . v_j) and D_i = sum_j p_ij dP_ij (= dO_i . o_i):
//   dv_j += drop_ij p_ij dO_i,  ds_ij = p_ij (dP_ij - D_i),  d sink = -sum_i p_sink,i D_i
// (the sink is a logit with no value), and ds_ij goes back through score_mod, the modifiers
// and the scale to the variant's raw score (ScoreGradients).
class HeadBackward {
public:
  HeadBackward(const KernelTensors& t, const HeadInputs& in, const Array4& dO,
               const MaskEvaluator& mask, const ScoreDerivatives& derivatives, double sink,
               int64_t b, int64_t h)
      : spec_(t.spec()), in_(in), dO_(dO), mask_(mask), derivatives_(derivatives), b_(b), h_(h),
        g_(h / spec_.groupSize()), keys_(in.k.dims[2]), score_(t, in, b, h),
        scoreGradients_(score_), row_(mask, score_, b, h, keys_, sink), probability_(keys_),
        dP_(keys_) {
    share_.value.assign(keys_ * spec_.dV, 0);
  }

  HeadShare run(int64_t seqQ) {
    for (int64_t i = 0; i < seqQ; ++i) {
      row_.form(i);
      if (row_.empty() && !row_.special())
        continue; // no key: o_i = 0 whatever the inputs
      const double rowSum = addValueGradients(i);
      share_.sink -= (row_.special() ? kNaN : row_.sinkProbability()) * rowSum;
      addScoreGradients(i, rowSum);
    }
    scoreGradients_.finish();
    share_.query = scoreGradients_.query();
    share_.key = scoreGradients_.key();
    share_.weights = scoreGradients_.weights();
    return std::move(share_);
  }

private:
  // A NaN row's o is NaN, and so is every gradient it reaches.
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

  // Row i's p_j and dP_j, adding drop_j p_j dO_i to dv_j; returns D_i.
  double addValueGradients(int64_t i) {
    const double* dOi = dO_.row(b_, h_, i);
    double rowSum = 0;
    for (int64_t j = 0; j < keys_; ++j) {
      if (!row_.kept(j))
        continue;
      const double drop = mask_.dropFactor(b_, h_, i, j);
      const double* v = in_.v.row(b_, g_, j);
      probability_[j] = row_.special() ? kNaN : row_.probability(j);
      double dot = 0;
      for (int64_t e = 0; e < spec_.dV; ++e) {
        dot += dOi[e] * v[e];
        share_.value[j * spec_.dV + e] += drop * probability_[j] * dOi[e];
      }
      dP_[j] = drop * dot;
      rowSum += probability_[j] * dP_[j];
    }
    return rowSum;
  }

  // ds_ij back through the chain to the raw score, and the aux tables' shares kept.
  void addScoreGradients(int64_t i, double rowSum) {
    for (int64_t j = 0; j < keys_; ++j) {
      if (!row_.kept(j))
        continue;
      const double ds = probability_[j] * (dP_[j] - rowSum);
      const ScoreSite site{b_, h_, i, j, row_.scaled(j), row_.modified(j)};
      const ChainGradients chain = derivatives_.chain(site, ds);
      scoreGradients_.add(i, j, spec_.scale * chain.scaled);
      if (derivatives_.readsAux())
        share_.scores.push_back({site, ds, chain});
    }
  }

  const Spec& spec_;
  const HeadInputs& in_;
  const Array4& dO_;
  const MaskEvaluator& mask_;
  const ScoreDerivatives& derivatives_;
  int64_t b_, h_, g_, keys_;
  ScoreFunction score_;
  ScoreGradients scoreGradients_;
  RowScores row_;
  std::vector<double> probability_, dP_;
  HeadShare share_;
};

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
    shares[bh] =
        HeadBackward(t, in, dO, mask, derivatives, sinks[bh % H], bh / H, bh % H).run(t.seqQ());
  });

  AttentionGradients r{Array4(B, H, t.seqQ(), s.dQ), Array4(B, s.kvHeads, keys, s.dK),
                       Array4(B, s.kvHeads, keys, s.dV), derivatives.zeroAuxGradients()};
  std::vector<double> sinkGradients(H, 0);
  for (int64_t bh = 0; bh < B * H; ++bh) { // in order: deterministic sums
    const HeadShare& share = shares[bh];
    const int64_t h = bh % H;
    r.addHead(bh / H, h, h / s.groupSize(), share.query, share.key, share.value);
    sinkGradients[h] += share.sink;
    for (const auto& [name, part] : share.weights) {
      std::vector<double>& sum = r.arguments[name];
      sum.resize(part.size() * H, 0);
      for (size_t k = 0; k < part.size(); ++k)
        sum[h * part.size() + k] += part[k];
    }
    for (const HeadShare::Score& score : share.scores)
      derivatives.addAux(score.site, score.gradient, score.chain, r.arguments);
  }
  if (s.sinks)
    r.arguments["sinks"] = sinkGradients;
  return r;
}

} // namespace attnc
