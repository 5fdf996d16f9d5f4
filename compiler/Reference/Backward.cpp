#include "Reference/Attention.h"
#include "Reference/InputGradients.h"

namespace attnc {
namespace {

// mha's O = Concat(o_1, ..., o_H) W_O taken back: dL/do_h = dO W_O^T's columns of head h, and
// dW_O = Concat(o)^T dO, with W_O [H * d_v, d_model].
Array4 outputProjectionBack(const KernelTensors& t, const Array4& heads,
                            std::vector<double>& woGradient, const ParallelFor& parallelFor) {
  const Spec& s = t.spec();
  const std::vector<double> wo = t.dense("w_o"), dO = t.dense(gradientName("o"));
  const int64_t B = t.batch(), seqQ = t.seqQ(), columns = s.heads * s.dV;
  Array4 headGradient(B, s.heads, seqQ, s.dV);
  parallelFor(B * seqQ, [&](int64_t bi) {
    const double* row = &dO[bi * s.dModel];
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t e = 0; e < s.dV; ++e)
        for (int64_t c = 0; c < s.dModel; ++c)
          headGradient(bi / seqQ, h, bi % seqQ, e) += row[c] * wo[(h * s.dV + e) * s.dModel + c];
  });
  woGradient.assign(columns * s.dModel, 0);
  parallelFor(columns, [&](int64_t he) { // a row of W_O's gradient per body
    const int64_t h = he / s.dV, e = he % s.dV;
    for (int64_t bi = 0; bi < B * seqQ; ++bi)
      for (int64_t c = 0; c < s.dModel; ++c)
        woGradient[he * s.dModel + c] += heads(bi / seqQ, h, bi % seqQ, e) * dO[bi * s.dModel + c];
  });
  return headGradient;
}

// Each grad_<name> output: q's, k's and v's in the spec's layout (but mha's inputs), the others
// dense; an argument the scores never read (an aux tensor only mask_mod reads) has 0.
void storeGradients(const KernelTensors& t, const AttentionGradients& g) {
  for (const Argument& a : t.arguments()) {
    if (a.role != ArgumentRole::Output)
      continue;
    const std::string name = learnedName(a.name);
    if (t.spec().variant != Variant::Mha && (name == "q" || name == "k" || name == "v")) {
      t.storeHeadMajor(a.name, name == "q" ? g.q : name == "k" ? g.k : g.v);
      continue;
    }
    auto found = g.arguments.find(name);
    t.store(a.name, found != g.arguments.end() ? found->second
                                               : std::vector<double>(t.dense(name).size(), 0));
  }
}

} // namespace

void AttentionGradients::addHead(int64_t b, int64_t h, int64_t g, const std::vector<double>& query,
                                 const std::vector<double>& key, const std::vector<double>& value) {
  std::copy(query.begin(), query.end(), q.row(b, h, 0));
  for (size_t e = 0; e < key.size(); ++e)
    k.row(b, g, 0)[e] += key[e];
  for (size_t e = 0; e < value.size(); ++e)
    v.row(b, g, 0)[e] += value[e];
}

void runReferenceBackward(const KernelTensors& t, const ParallelFor& parallelFor) {
  const Spec& s = t.spec();
  const HeadInputs in = prepareHeadInputs(t, parallelFor);
  std::vector<double> woGradient;
  const Array4 outputGradient =
      s.variant == Variant::Mha
          ? outputProjectionBack(t, softmaxAttention(t, in, parallelFor).o, woGradient, parallelFor)
          : t.headMajor(gradientName("o"));
  AttentionGradients gradients = s.variant == Variant::Linear
                                     ? linearAttentionBackward(t, in, outputGradient, parallelFor)
                                     : softmaxAttentionBackward(t, in, outputGradient, parallelFor);
  if (s.variant == Variant::Mha)
    gradients.arguments["w_o"] = std::move(woGradient);
  addInputGradients(t, gradients, parallelFor);
  storeGradients(t, gradients);
}

} // namespace attnc
