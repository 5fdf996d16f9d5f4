#include "halide/AttentionSchedule.h"

#include <array>

namespace attnc::halide {
namespace {

using namespace Halide;

const std::array<ParamSpace, 4> kSpace{{
    {"query_tile", {8, 16, 32, 64, 128}, "query rows per parallel task (a multiple of row_unroll)"},
    {"key_block", {32, 64, 128, 256}, "keys merged per online-softmax step"},
    {"vector_width", {4, 8, 16}, "f32 lanes per vector"},
    {"row_unroll", {1, 2, 4, 8}, "query rows per register tile"},
}};

} // namespace

std::span<const ParamSpace> halideParamSpace() {
  return kSpace;
}

ScheduleParams defaultHalideSchedule(const std::string& family) {
  const int64_t lanes = family == "x86-avx512" ? 16 : family == "x86-avx2" ? 8 : 4;
  return ScheduleParams(
      "halide",
      {{"query_tile", 32}, {"key_block", 128}, {"vector_width", lanes}, {"row_unroll", 4}},
      "untuned starting point for " + family);
}

void scheduleAttention(AttentionAlgorithm& a, const Spec& spec, const ScheduleParams& params) {
  const int lanes = static_cast<int>(params.get("vector_width"));
  const int rows = static_cast<int>(params.get("row_unroll"));
  Var d = a.d, i = a.i, row = a.row, tile = a.tile, jj = a.jj, h = a.h, b = a.b;
  Var tileHead("tile_head"), task("task"), rowTile("row_tile"), rowInTile("row_in_tile"),
      keyVec("key_vec"), keyLane("key_lane");
  RVar block = a.blocks.x;
  const TailStrategy guard = TailStrategy::GuardWithIf;

  // A task is one query tile of one head of one batch entry; its state stays in cache while
  // the loop over key blocks streams through K and V.
  a.state.compute_root().vectorize(d, lanes, guard);
  a.state.update()
      .split(row, rowTile, rowInTile, rows)
      .reorder(d, rowInTile, rowTile, block, tile, h, b)
      .vectorize(d, lanes, guard)
      .fuse(tile, h, tileHead)
      .fuse(tileHead, b, task)
      .parallel(task);
  a.query.compute_at(a.state, task).vectorize(d, lanes, guard);

  // Per key block, for the whole tile: keys (transposed), scores, masks, block statistics.
  a.keyBlock.compute_at(a.state, block).vectorize(jj, lanes, guard);
  a.masked.compute_at(a.state, block)
      .split(row, rowTile, rowInTile, rows)
      .split(jj, keyVec, keyLane, lanes, guard)
      .reorder(keyLane, rowInTile, keyVec, rowTile)
      .vectorize(keyLane)
      .unroll(rowInTile);
  // Register tile of the score GEMM: a vector of keys by `rows` query rows, over the head dim.
  a.score.compute_at(a.masked, keyVec).vectorize(jj, lanes, guard).unroll(row);
  a.score.update().reorder(jj, row, a.dot.x).vectorize(jj, lanes, guard).unroll(row);
  a.blockMax.compute_at(a.state, block);
  a.prob.compute_at(a.state, block).vectorize(jj, lanes, guard);
  a.blockSum.compute_at(a.state, block);
  // Register tile of the PV GEMM: the head dim by `rows` query rows, over the block's keys.
  a.blockAcc.compute_at(a.state, rowTile).vectorize(d, lanes, guard).unroll(row);
  a.blockAcc.update().reorder(d, row, a.inKey.x).vectorize(d, lanes, guard).unroll(row);

  a.o.compute_root().vectorize(d, lanes, guard).parallel(b);
  if (spec.lse)
    a.lse.compute_root().vectorize(i, lanes, guard);
}

} // namespace attnc::halide
