#include "Reference/Reference.h"

#include "Reference/Attention.h"
#include "attnc/SequenceViews.hpp"

namespace attnc {

ParallelFor serialFor() {
  return [](int64_t count, const std::function<void(int64_t)>& body) {
    for (int64_t i = 0; i < count; ++i)
      body(i);
  };
}

namespace {

// A ragged batch, a run of sequences with the same number of rows at a time, on views of its
// tensors (attnc/SequenceViews.hpp), each the plain spec's computation on its own rows.
void runRagged(const KernelTensors& t, const ParallelFor& parallelFor) {
  const Spec plain = t.spec().unragged();
  std::vector<std::vector<DimExpr>> dims;
  for (const Argument& a : t.arguments())
    dims.push_back(a.shape);
  SequenceViews views(dims, t.tensors());
  std::vector<int64_t> offsets;
  for (double offset : t.dense("cu_seqlens_q"))
    offsets.push_back(static_cast<int64_t>(offset));
  forEachRun(offsets, [&](int64_t b, int64_t sequences, int64_t first, int64_t rows) {
    KernelTensors run(plain, views.select(b, sequences, first, rows), sequences, rows, t.seqK());
    runReference(run, parallelFor);
    return 0;
  });
}

} // namespace

void runReference(const KernelTensors& t, const ParallelFor& parallelFor) {
  const Spec& s = t.spec();
  if (s.raggedQueries) {
    runRagged(t, parallelFor);
    return;
  }
  HeadInputs projected; // save_projections': mha's projections before RoPE
  HeadInputs in = prepareHeadInputs(t, parallelFor, s.saveProjections ? &projected : nullptr);
  AttentionResult r = s.variant == Variant::Linear ? linearAttention(t, in, parallelFor)
                                                   : softmaxAttention(t, in, parallelFor);
  if (s.variant == Variant::Mha) {
    // O = Concat(head_1, ..., head_H) W_O, with W_O [H * d_v, d_model].
    const std::vector<double> wo = t.dense("w_o");
    const int64_t B = t.batch(), seqQ = t.seqQ();
    std::vector<double> out(B * seqQ * s.dModel, 0);
    parallelFor(B * seqQ, [&](int64_t bi) {
      const int64_t b = bi / seqQ, i = bi % seqQ;
      double* row = &out[bi * s.dModel];
      for (int64_t h = 0; h < s.heads; ++h)
        for (int64_t e = 0; e < s.dV; ++e) {
          const double x = r.o(b, h, i, e);
          const double* w = &wo[(h * s.dV + e) * s.dModel];
          for (int64_t c = 0; c < s.dModel; ++c)
            row[c] += x * w[c];
        }
    });
    t.store("o", out);
  } else {
    t.storeHeadMajor("o", r.o);
  }
  if (s.lse)
    t.store("lse", r.lse);
  if (s.weights)
    t.store("weights", r.weights);
  if (s.saveProjections) {
    t.store("q_proj", headsSideBySide(projected.q));
    t.store("k_proj", headsSideBySide(projected.k));
    t.store("v_proj", headsSideBySide(projected.v));
    t.store("o_heads", headsSideBySide(r.o));
  }
}

} // namespace attnc
