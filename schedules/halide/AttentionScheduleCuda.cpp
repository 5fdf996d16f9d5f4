// The CUDA schedule of the Halide attention algorithm: one thread per query row. A block holds
// a query tile of one head (query_tile threads); each thread walks the key blocks its tile can
// use, with the block's scores, probabilities and P·V in its own registers and local memory,
// exactly the CPU algorithm with rows on threads instead of vector lanes. The threads of a warp
// read the same keys and values, so those loads are broadcasts.
#include "halide/AttentionSchedule.h"

namespace attnc::halide {

using namespace Halide;

void scheduleAttentionCuda(AttentionAlgorithm& a, const Spec& spec, const ScheduleParams& params) {
  const int rows = static_cast<int>(params.get("query_tile"));
  Var d = a.d, i = a.i, row = a.row, tile = a.tile, h = a.h, b = a.b;
  RVar block = a.blocks.x;

  // The running state lives in global memory; each thread merges its row's blocks in order.
  a.state.compute_root().gpu_blocks(tile, h, b).gpu_threads(row);
  Stage merge = a.state.update();
  merge.reorder(d, block, row, tile, h, b).gpu_blocks(tile, h, b).gpu_threads(row);
  // Per thread and key block: the block's statistics and P·V for this row.
  for (Func f : {a.masked, a.blockMax, a.prob, a.blockSum, a.blockAcc})
    f.compute_at(a.state, block);
  a.score.compute_at(a.masked, a.jj);
  a.query.compute_at(a.state, row);
  if (spec.rope)
    a.key.compute_root().gpu_tile(a.d, Var("t"), Var("to"), Var("ti"), Var("dto"), Var("dti"), 32,
                                  8);
  for (Func table : a.terms->tables())
    table.compute_root();

  Var dOuter("d_outer"), iOuter("i_outer"), dInner("d_inner"), iInner("i_inner"), hb("hb");
  a.o.compute_root()
      .fuse(h, b, hb)
      .gpu_tile(d, i, dOuter, iOuter, dInner, iInner, 32, 4, TailStrategy::GuardWithIf)
      .gpu_blocks(hb);
  Var io("io"), ii("ii");
  a.rowLse.compute_root()
      .fuse(h, b, hb)
      .gpu_tile(i, io, ii, rows, TailStrategy::GuardWithIf)
      .gpu_blocks(hb);
  if (spec.lse)
    a.lse.compute_root()
        .fuse(h, b, hb)
        .gpu_tile(i, io, ii, rows, TailStrategy::GuardWithIf)
        .gpu_blocks(hb);
  if (spec.weights) {
    Var jo("jo"), ji("ji");
    a.weights.compute_root()
        .fuse(h, b, hb)
        .gpu_tile(a.j, i, jo, io, ji, ii, 32, 4, TailStrategy::GuardWithIf)
        .gpu_blocks(hb);
    a.weightQuery.compute_at(a.weights, ji);
    a.weightScore.compute_at(a.weights, ji);
  }
}

} // namespace attnc::halide
