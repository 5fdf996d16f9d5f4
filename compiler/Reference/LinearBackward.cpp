#include "Reference/Attention.h"
#include "Reference/FeatureMap.h"
#include "Semantics/Positions.h"

#include <algorithm>

namespace attnc {
namespace {

// One (b, h)'s share: q's rows, and its KV head's keys and values (which GQA sums over the
// group afterwards, in order).
struct LinearShare {
  std::vector<double> query, key, value;
};

// With a_ij = phi(q_i) . phi(k_j) over the keys row i sees and Z_i = sum_j a_ij,
// o_i = sum_j a_ij v_j / Z_i, so with u_i = dO_i . o_i:
//   dv_j += a_ij / Z_i dO_i,  dL/da_ij = (dO_i . v_j - u_i) / Z_i,
// then dphi(q_i) = sum_j dL/da_ij phi(k_j), dphi(k_j) = sum_i dL/da_ij phi(q_i), and phi's
// derivative. A row with Z_i = 0 has o_i = 0 and gives nothing.
LinearShare headGradients(const KernelTensors& t, const HeadInputs& in, const Array4& dO,
                          const FeatureMapper& phi, int64_t offset, int64_t valid, int64_t b,
                          int64_t h) {
  const Spec& s = t.spec();
  const int64_t g = h / s.groupSize(), m = phi.size(), dv = s.dV, dk = s.dK;
  const bool causal = s.masks.has(MaskKind::Causal);
  std::vector<double> phiK(valid * m), phiKGradient(valid * m, 0), phiQ(m), phiQGradient(m);
  for (int64_t j = 0; j < valid; ++j)
    phi(in.k.row(b, g, j), &phiK[j * m]);
  LinearShare share{std::vector<double>(t.seqQ() * dk, 0),
                    std::vector<double>(in.k.dims[2] * dk, 0),
                    std::vector<double>(in.v.dims[2] * dv, 0)};
  std::vector<double> a(valid), o(dv);
  for (int64_t i = 0; i < t.seqQ(); ++i) {
    const int64_t seen = causal ? std::clamp<int64_t>(i + offset + 1, 0, valid) : valid;
    phi(in.q.row(b, h, i), phiQ.data());
    double z = 0;
    for (int64_t j = 0; j < seen; ++j) {
      a[j] = 0;
      for (int64_t f = 0; f < m; ++f)
        a[j] += phiQ[f] * phiK[j * m + f];
      z += a[j];
    }
    if (z == 0)
      continue;
    std::fill(o.begin(), o.end(), 0.0);
    for (int64_t j = 0; j < seen; ++j)
      for (int64_t e = 0; e < dv; ++e)
        o[e] += a[j] * in.v(b, g, j, e) / z;
    const double* dOi = dO.row(b, h, i);
    double u = 0;
    for (int64_t e = 0; e < dv; ++e)
      u += dOi[e] * o[e];
    std::fill(phiQGradient.begin(), phiQGradient.end(), 0.0);
    for (int64_t j = 0; j < seen; ++j) {
      double dot = 0;
      for (int64_t e = 0; e < dv; ++e) {
        dot += dOi[e] * in.v(b, g, j, e);
        share.value[j * dv + e] += a[j] / z * dOi[e];
      }
      const double da = (dot - u) / z;
      for (int64_t f = 0; f < m; ++f) {
        phiQGradient[f] += da * phiK[j * m + f];
        phiKGradient[j * m + f] += da * phiQ[f];
      }
    }
    phi.addInputGradient(in.q.row(b, h, i), phiQGradient.data(), &share.query[i * dk]);
  }
  for (int64_t j = 0; j < valid; ++j)
    phi.addInputGradient(in.k.row(b, g, j), &phiKGradient[j * m], &share.key[j * dk]);
  return share;
}

} // namespace

AttentionGradients linearAttentionBackward(const KernelTensors& t, const HeadInputs& in,
                                           const Array4& dO, const ParallelFor& parallelFor) {
  const Spec& s = t.spec();
  const int64_t B = t.batch(), H = s.heads, keys = in.k.dims[2];
  const int64_t offset = positions::alignmentOffset(s, t.seqQ(), t.seqK());
  const std::vector<int64_t> lengths = keyLengths(t);
  const FeatureMapper phi(t);
  std::vector<LinearShare> shares(B * H);
  parallelFor(B * H, [&](int64_t bh) {
    shares[bh] = headGradients(t, in, dO, phi, offset, lengths[bh / H], bh / H, bh % H);
  });
  AttentionGradients r{Array4(B, H, t.seqQ(), s.dQ),
                       Array4(B, s.kvHeads, keys, s.dK),
                       Array4(B, s.kvHeads, keys, s.dV),
                       {}};
  for (int64_t bh = 0; bh < B * H; ++bh) // in order: deterministic sums
    r.addHead(bh / H, bh % H, bh % H / s.groupSize(), shares[bh].query, shares[bh].key,
              shares[bh].value);
  return r;
}

} // namespace attnc
