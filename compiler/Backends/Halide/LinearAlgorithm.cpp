#include "Backends/Halide/LinearAlgorithm.h"

#include "Backends/Halide/IeeeFloat.h"

#include <cmath>

namespace attnc::halide {

using namespace Halide;

LinearAlgorithm buildLinearAttention(const Spec& s, int chunk) {
  LinearAlgorithm a;
  a.terms = std::make_shared<ScoreTerms>(s);
  const ScoreTerms& terms = *a.terms;
  const bool favor = s.featureMap == FeatureMap::Favor, causal = s.masks.has(MaskKind::Causal);
  const int dk = static_cast<int>(s.dK), dv = static_cast<int>(s.dV);
  const int m = favor ? static_cast<int>(s.features) : dk;
  const int group = static_cast<int>(s.groupSize());
  a.chunk = chunk;
  a.features = m;
  Var e = a.e, f = a.f, i = a.i, j = a.j, c = a.c, h = a.h, g = a.g, b = a.b, d("d"), jj("jj");
  const Expr seqQ = terms.seqQ(), seqK = terms.seqK();
  // Loads clamp positions and feature indices, so schedules may round loops up to whole tiles.
  auto query = [&](Expr x, Expr row, Expr head, Expr batch) {
    return cast<float>(terms.load(terms.q(), min(x, dk - 1), min(row, seqQ - 1), head, batch));
  };
  auto key = [&](Expr x, Expr t, Expr kvHead, Expr batch) {
    return cast<float>(terms.load(terms.k(), min(x, dk - 1), min(t, seqK - 1), kvHead, batch));
  };

  a.phiQ = Func("phi_q");
  a.phiK = Func("phi_k");
  if (favor) {
    // phi(x)_f = exp(w_f . x' - |x'|^2 / 2) / sqrt(m), x' = sqrt(scale) x.
    const float root = static_cast<float>(std::sqrt(s.scale));
    const float normaliser = static_cast<float>(1.0 / std::sqrt(static_cast<double>(m)));
    a.omegaT = Func("omega_t");
    a.omegaT(f, d) = cast<float>(terms.param("omega")(d, f));
    auto dotWithFeatures = [&](const char* name, const std::function<Expr(Expr, Expr, Expr, Expr)>& x) {
      return makeProjection(name, dk, [&, x](Expr feature, Expr t, Expr head, Expr batch, Expr r) {
        return a.omegaT(min(feature, m - 1), r) * (x(r, t, head, batch) * root);
      });
    };
    a.queryDot = dotWithFeatures("query_dot", query);
    a.keyDot = dotWithFeatures("key_dot", key);
    RDom r(0, dk, "norm_r");
    auto halfNorm = [&](const char* name, const std::function<Expr(Expr, Expr, Expr, Expr)>& x) {
      Func norm(name);
      Var t("t"), head("head");
      norm(t, head, b) = 0.0f;
      Expr scaled = x(r, t, head, b) * root;
      norm(t, head, b) += 0.5f * scaled * scaled;
      return norm;
    };
    a.queryNorm = halfNorm("query_norm", query);
    a.keyNorm = halfNorm("key_norm", key);
    a.phiQ(f, i, h, b) = ieeeExp(a.queryDot.acc(f, i, h, b) - a.queryNorm(i, h, b)) * normaliser;
    a.phiK(f, j, g, b) = ieeeExp(a.keyDot.acc(f, j, g, b) - a.keyNorm(j, g, b)) * normaliser;
  } else {
    auto phi = [&](Expr x) {
      return s.featureMap == FeatureMap::Elu1 ? select(x > 0, x + 1.0f, exp(x)) : max(x, 0.0f);
    };
    a.phiQ(f, i, h, b) = phi(query(f, i, h, b));
    a.phiK(f, j, g, b) = phi(key(f, j, g, b));
  }
  // [v_j, 1]: the extra column carries z, the denominator's sum of key features.
  a.value = Func("value_ones");
  a.value(e, j, g, b) = select(e < dv,
                               cast<float>(terms.load(terms.v(), min(e, dv - 1), min(j, seqK - 1),
                                                      g, b)),
                               1.0f);
  const Expr valid = terms.validKeys(b);
  // Causal: row i sees the first seen(i) keys.
  auto seen = [&](Expr row, Expr batch) {
    return clamp(terms.position(row) + 1, 0, terms.validKeys(batch));
  };

  if (!causal) {
    // S = sum_{j < valid} phi(k_j) [v_j, 1]^T; numerator and denominator phi(q_i)^T S.
    a.keyValue = makeProjection("key_value", seqK, [&](Expr x, Expr feature, Expr kvHead,
                                                       Expr batch, Expr r) {
      return select(r < terms.validKeys(batch), a.phiK(min(feature, m - 1), r, kvHead, batch),
                    0.0f) *
             a.value(min(x, dv), r, kvHead, batch);
    });
    a.inter = makeProjection("inter", m, [&](Expr x, Expr row, Expr head, Expr batch, Expr r) {
      return a.phiQ(r, min(row, seqQ - 1), head, batch) *
             a.keyValue.acc(min(x, dv), r, head / group, batch);
    });
    a.total = Func("total");
    a.total(e, i, h, b) = a.inter.acc(e, i, h, b);
  } else {
    // Chunk c starts at p_c = seen(cC).
    auto start = [&](Expr chunkIndex, Expr batch) { return seen(chunkIndex * chunk, batch); };
    a.inChunk = RDom(0, chunk, "in_chunk");
    a.chunkSum = Func("chunk_sum");
    a.chunkSum(e, f, c, g, b) = 0.0f;
    {
      Expr keyIndex = start(c, b) + a.inChunk.x;
      Expr inside = keyIndex < start(c + 1, b);
      a.chunkSum(e, f, c, g, b) +=
          select(inside, a.phiK(min(f, m - 1), min(keyIndex, seqK - 1), g, b), 0.0f) *
          a.value(min(e, dv), keyIndex, g, b);
    }
    // P_0 = the keys before the first chunk (rows past Tk - Tq with bottom-right alignment),
    // P_c = P_{c-1} + D_{c-1}: the exclusive prefix over chunks.
    Projection& head = a.headSum;
    head.r = RDom(0, seqK, "head_r");
    head.r.where(head.r.x < start(0, head.b));
    head.acc = Func("head_sum");
    head.acc(head.e, head.t, head.x, head.b) = 0.0f;
    head.acc(head.e, head.t, head.x, head.b) +=
        a.phiK(min(head.t, m - 1), head.r.x, head.x, head.b) *
        a.value(min(head.e, dv), head.r.x, head.x, head.b);
    const Expr chunkCount = (seqQ + chunk - 1) / chunk;
    a.chunks = RDom(1, max(chunkCount - 1, 0), "chunks");
    a.prefix = Func("prefix");
    a.prefix(e, f, c, g, b) = head.acc(e, f, g, b);
    a.prefix(e, f, a.chunks.x, g, b) =
        a.prefix(e, f, a.chunks.x - 1, g, b) + a.chunkSum(e, f, a.chunks.x - 1, g, b);

    // phi(q_i) . phi(k_{p_c + jj}) for the keys row i sees past its chunk's prefix.
    RDom overF(0, m, "intra_f");
    Func intraDot("intra_dot");
    intraDot(jj, i, h, b) = 0.0f;
    {
      Expr keyIndex = min(start(i / chunk, b) + jj, seqK - 1);
      intraDot(jj, i, h, b) +=
          a.phiQ(overF.x, min(i, seqQ - 1), h, b) * a.phiK(overF.x, keyIndex, h / group, b);
    }
    a.intraDot = intraDot;
    a.intraScore = Func("intra_score");
    a.intraScore(jj, i, h, b) =
        select(start(i / chunk, b) + jj < seen(i, b), intraDot(jj, i, h, b), 0.0f);
    a.inter = makeProjection("inter", m, [&](Expr x, Expr row, Expr head, Expr batch, Expr r) {
      Expr rowIn = min(row, seqQ - 1);
      return a.phiQ(r, rowIn, head, batch) *
             a.prefix(min(x, dv), r, rowIn / chunk, head / group, batch);
    });
    a.intra = makeProjection("intra", chunk, [&](Expr x, Expr row, Expr head, Expr batch, Expr r) {
      Expr rowIn = min(row, seqQ - 1);
      return a.intraScore(r, rowIn, head, batch) *
             a.value(min(x, dv), start(rowIn / chunk, batch) + r, head / group, batch);
    });
    a.total = Func("total");
    a.total(e, i, h, b) = a.inter.acc(e, i, h, b) + a.intra.acc(e, i, h, b);
  }

  // o = numerator / denominator; 0 when the denominator is exactly 0 (no key, or features all 0).
  Expr denominator = a.total(dv, i, h, b);
  Expr out = select(denominator != 0, a.total(e, i, h, b) / denominator, 0.0f);
  a.o = Func("o");
  if (s.layout == Layout::Bhsd)
    a.o(e, i, h, b) = stored(s.dtype, out);
  else
    a.o(e, h, i, b) = stored(s.dtype, out);
  a.o.output_buffer().dim(0).set_stride(Expr()).dim(0).set_bounds(0, dv);
  a.outputs = {a.o};

  if (s.weights) {
    // weights_ij = phi(q_i) . phi(k_j) / denominator_i for the keys row i sees.
    a.overFeatures = RDom(0, m, "weight_f");
    a.weightScore = Func("weight_score");
    a.weightScore(j, i, h, b) = 0.0f;
    a.weightScore(j, i, h, b) += a.phiQ(a.overFeatures.x, i, h, b) *
                                 a.phiK(a.overFeatures.x, min(j, seqK - 1), h / group, b);
    Expr sees = causal ? seen(i, b) : valid;
    a.weights = Func("weights");
    a.weights(j, i, h, b) =
        select(j < sees && denominator != 0, a.weightScore(j, i, h, b) / denominator, 0.0f);
    a.weights.output_buffer().dim(0).set_stride(Expr());
    a.outputs.push_back(a.weights);
  }
  return a;
}

} // namespace attnc::halide
