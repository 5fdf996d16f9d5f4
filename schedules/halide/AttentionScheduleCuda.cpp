// The CUDA schedule of the Halide attention algorithm. A block holds a query tile of one head,
// one query row per thread (query_tile threads). Per key block, the threads first stage the
// block's keys and values (converted to f32, RoPE'd when asked) in shared memory, the d x keys
// elements spread over the threads so that neighbouring threads read neighbouring elements
// (coalesced); after the barrier each thread computes its row's scores, probabilities and P·V
// from shared memory, where every thread of a warp reads the same key (a broadcast). The
// scaled query tile is staged in shared memory once per block when it fits beside the K/V
// tiles, otherwise each thread reads its row from global memory per key block.
#include "Support/Errors.h"
#include "halide/AttentionSchedule.h"

#include <string>
#include <vector>

namespace attnc::halide {

using namespace Halide;

namespace {

// Static shared memory a block may use without opting in (cuFuncSetAttribute), which Halide 14's
// CUDA runtime does not do.
constexpr int64_t kSharedLimit = 48 * 1024;

// Spreads a staged stage's (inner, outer) loops over `threads` threads, inner fastest.
void stageOnThreads(Func f, Var inner, Var outer, int threads) {
  Var fused("fused"), serial("serial"), lane("lane");
  f.fuse(inner, outer, fused)
      .split(fused, serial, lane, threads, TailStrategy::GuardWithIf)
      .gpu_threads(lane)
      .store_in(MemoryType::GPUShared);
}

// A table computed once per call on the GPU: its dimensions fused into one, in blocks of 64
// threads.
void computeTableOnGpu(Func table) {
  const std::vector<Var> args = table.args();
  Var fused = args.front();
  for (size_t i = 1; i < args.size(); ++i) {
    Var outer(table.name() + "_fused_" + std::to_string(i));
    table.fuse(fused, args[i], outer);
    fused = outer;
  }
  Var blockIndex("table_block"), lane("table_lane");
  table.compute_root().gpu_tile(fused, blockIndex, lane, 64, TailStrategy::GuardWithIf);
}

// Bytes of f32 staged per block: the query tile and one block of keys and values.
int64_t stagedBytes(const Spec& spec, int64_t queryTile, int64_t keyBlock) {
  return (queryTile * spec.dK + keyBlock * (spec.dK + spec.dV)) * 4;
}

} // namespace

void checkCudaSchedule(const ScheduleParams& params, const Spec& spec) {
  const int64_t keys = params.get("key_block");
  const int64_t kvBytes = keys * (spec.dK + spec.dV) * 4;
  if (kvBytes > kSharedLimit)
    throw UsageError("schedule: key_block=" + std::to_string(keys) + " stages " +
                     std::to_string(kvBytes) + " bytes of f32 keys and values in shared memory " +
                     "for d_k=" + std::to_string(spec.dK) + " d_v=" + std::to_string(spec.dV) +
                     "; at most " + std::to_string(kSharedLimit) +
                     " are allowed, so lower key_block");
}

void scheduleAttentionCuda(AttentionStages& a, const Spec& spec, const ScheduleParams& params) {
  const int rows = static_cast<int>(params.get("query_tile"));
  const int keys = static_cast<int>(params.get("key_block"));
  Var d = a.d, row = a.row, tile = a.tile, jj = a.jj, h = a.h, b = a.b;
  RVar block = a.blocks.x;

  // The running state (M, L, A) lives in global memory, each row's in its thread; the loop over
  // key blocks is serial at the block level, outside the threads, so the staged tiles are shared.
  a.state.compute_root().gpu_blocks(tile, h, b).gpu_threads(row);
  a.state.update().reorder(d, row, block, tile, h, b).gpu_blocks(tile, h, b).gpu_threads(row);
  stageOnThreads(a.keyBlock.compute_at(a.state, block), d, jj, rows);
  stageOnThreads(a.valueBlock.compute_at(a.state, block), d, jj, rows);
  // Per thread and key block: the block's statistics and P·V for this row, in the thread's own
  // stack. The thread's storage is sized over the whole block loop, where masks make Halide's
  // bounds symbolic; it is one row of one block of `keys` keys.
  for (Func f : {a.masked, a.blockMax, a.prob, a.blockSum, a.blockAcc})
    f.compute_at(a.state, row).store_in(MemoryType::Stack);
  for (Func f : {a.masked, a.prob})
    f.bound_storage(row, 1).bound_storage(jj, keys).bound_storage(a.kb, 1);
  for (Func f : {a.blockMax, a.blockSum, a.blockAcc})
    f.bound_storage(row, 1).bound_storage(a.kb, 1);
  a.blockAcc.bound_storage(d, static_cast<int>(spec.dV));
  a.score.compute_at(a.masked, jj);
  if (stagedBytes(spec, rows, keys) <= kSharedLimit) {
    a.query.compute_at(a.state, tile).reorder(d, row);
    stageOnThreads(a.query, d, row, rows);
  }
  // Tiles of 32 columns x 8 keys, guarded: shifting a partial tile inwards would read keys before
  // the first where Tk < 8.
  if (a.rotatedKeys.defined())
    a.rotatedKeys.compute_root().gpu_tile(a.d, Var("t"), Var("to"), Var("ti"), Var("dto"),
                                          Var("dti"), 32, 8, TailStrategy::GuardWithIf);
  // The small tables are computed on the GPU too: an aux tensor's summaries read the tensor
  // where the runtime passes it, in device memory (a host stage would need a host copy). The
  // per-task ones (the tile classes of a mask's aux reads) are computed for every task at once,
  // before the blocks that read them.
  for (Func table : a.tables)
    computeTableOnGpu(table);
  for (Func table : a.perTaskTables)
    computeTableOnGpu(table);

  Var dOuter("d_outer"), iOuter("i_outer"), dInner("d_inner"), iInner("i_inner"), hb("hb");
  a.o.compute_root()
      .fuse(h, b, hb)
      .gpu_tile(d, a.i, dOuter, iOuter, dInner, iInner, 32, 4, TailStrategy::GuardWithIf)
      .gpu_blocks(hb);
  Var io("io"), ii("ii");
  if (a.rowLse.defined())
    a.rowLse.compute_root()
        .fuse(h, b, hb)
        .gpu_tile(a.i, io, ii, rows, TailStrategy::GuardWithIf)
        .gpu_blocks(hb);
  if (spec.lse)
    a.lse.compute_root()
        .fuse(h, b, hb)
        .gpu_tile(a.i, io, ii, rows, TailStrategy::GuardWithIf)
        .gpu_blocks(hb);
  if (spec.weights) {
    a.rowNormaliser.compute_root()
        .fuse(h, b, hb)
        .gpu_tile(a.i, io, ii, rows, TailStrategy::GuardWithIf)
        .gpu_blocks(hb);
    Var jo("jo"), ji("ji");
    a.weights.compute_root()
        .fuse(h, b, hb)
        .gpu_tile(a.j, a.i, jo, io, ji, ii, 32, 4, TailStrategy::GuardWithIf)
        .gpu_blocks(hb);
    a.weightQuery.compute_at(a.weights, ji);
    a.weightScore.compute_at(a.weights, ji);
  }
}

} // namespace attnc::halide
