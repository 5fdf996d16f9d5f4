#include "halide/AttentionSchedule.h"

namespace attnc::halide {

using namespace Halide;

void scheduleLinearAttention(LinearStages& a, const Spec& spec, const ScheduleParams& params) {
  const int lanes = static_cast<int>(params.get("vector_width"));
  const TailStrategy guard = TailStrategy::GuardWithIf;
  Var e = a.e, f = a.f, i = a.i, j = a.j, c = a.c, h = a.h, g = a.g, b = a.b;
  Var outer("outer"), inner("inner"), task("task"), fused("fused");
  const LoopLevel root = LoopLevel::root();

  // FAVOR+'s products and norms, and the key features, once per call (the features in parallel
  // over blocks of positions).
  if (spec.featureMap == FeatureMap::Favor) {
    a.omegaT.compute_root();
    scheduleProjection(a.queryDot, lanes, root, true);
    scheduleProjection(a.keyDot, lanes, root, true);
    Var t("t");
    for (Func norm : {a.queryNorm, a.keyNorm}) {
      norm.compute_root().vectorize(t, lanes, guard);
      norm.update().vectorize(t, lanes, guard);
    }
  }
  a.phiK.compute_root().vectorize(f, lanes, guard).split(j, outer, inner, 64, guard).parallel(outer);

  if (spec.masks.has(MaskKind::Causal)) {
    // Chunk sums: independent, so in parallel; each a (d_v + 1) x m register-tiled product
    // over the chunk's keys.
    Var eo("eo"), ei("ei"), fo("fo"), fi("fi");
    Func sums = a.chunkSum.in();
    sums.compute_root()
        .split(e, eo, ei, lanes, TailStrategy::RoundUp)
        .split(f, fo, fi, kProjectionRows, TailStrategy::RoundUp)
        .reorder(ei, fi, eo, fo, c, g, b)
        .vectorize(ei)
        .fuse(c, g, fused)
        .fuse(fused, b, task)
        .parallel(task);
    a.chunkSum.compute_at(sums, eo).vectorize(e).unroll(f);
    a.chunkSum.update().reorder(e, f, a.inChunk.x).vectorize(e).unroll(f);
    scheduleProjection(a.headSum, lanes, root, true);
    // The scan over chunks: serial in c, parallel over features.
    a.prefix.compute_root().vectorize(e, lanes, guard).parallel(f);
    a.prefix.update().vectorize(e, lanes, guard).parallel(f);
  } else {
    scheduleProjection(a.keyValue, lanes, root, true);
  }

  // A task is a chunk of rows of one head: phi(q)^T P, the chunk's own keys, and the sum.
  const int rows = a.chunk;
  a.total.compute_root()
      .split(i, outer, inner, rows, guard)
      .reorder(e, inner, outer, h, b)
      .vectorize(e, lanes, guard)
      .fuse(outer, h, fused)
      .fuse(fused, b, task)
      .parallel(task);
  // The chunk's query features are made in its task, where both products read them (with the
  // weights pass reading them too, once per call).
  if (spec.weights)
    a.phiQ.compute_root().vectorize(f, lanes, guard).split(i, outer, inner, 64, guard).parallel(outer);
  else
    a.phiQ.compute_at(a.total, task).vectorize(f, lanes, guard);
  scheduleProjection(a.inter, lanes, LoopLevel(a.total, task), false);
  if (spec.masks.has(MaskKind::Causal)) {
    scheduleProjection(a.intra, lanes, LoopLevel(a.total, task), false);
    Var jj("jj");
    a.intraDot.compute_at(a.total, task).vectorize(jj, lanes, guard);
    a.intraDot.update().vectorize(jj, lanes, guard);
  }
  a.o.compute_root().vectorize(e, lanes, guard).split(i, outer, inner, 64, guard).parallel(outer);
  if (spec.weights)
    scheduleWeightsPass(a.weights, a.weightScore, a.overFeatures.x, lanes);
}

} // namespace attnc::halide
