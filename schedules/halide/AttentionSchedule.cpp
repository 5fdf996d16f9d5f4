#include "halide/AttentionSchedule.h"

#include "Support/Errors.h"

#include <algorithm>
#include <array>

namespace attnc::halide {
namespace {

using namespace Halide;

const std::array<ParamSpace, 8> kSpace{{
    {"query_tile",
     {8, 16, 24, 32, 48, 64, 96, 128},
     "query rows per task (a multiple of vector_width)"},
    {"key_block", {16, 32, 64, 128, 256}, "keys merged per online-softmax step"},
    {"vector_width", {4, 8, 16}, "f32 lanes per vector"},
    {"key_unroll", {2, 4, 6, 8}, "keys per register tile of the score GEMM"},
    {"row_unroll", {1, 2, 3, 4, 6, 8}, "query rows per register tile of the PV GEMM"},
    {"value_split", {0, 32, 64, 128}, "head-dim chunk merged at a time (0: all of it)"},
    {"autoscheduler",
     {0, 1, 2, 3},
     "0: attnc's schedule; 1 Adams2019, 2 Li2018, 3 Mullapudi2016: Halide 14's autoscheduler "
     "schedules the algorithm (query_tile and key_block still shape it)"},
    {"chunk",
     {16, 32, 64, 128, 256},
     "variant=linear: query rows per chunk of the causal prefix sums (and per task)"},
}};

} // namespace

void scheduleProjection(Projection p, int lanes, LoopLevel at, bool parallel) {
  Var eo("eo"), ei("ei"), to("to"), ti("ti"), tx("tx"), task("task");
  // Reads are clamped, so rounding the loops up to whole tiles is safe and keeps them constant.
  const int width = kProjectionVectors * lanes;
  Func tiles = p.acc.in();
  tiles.compute_at(at)
      .split(p.e, eo, ei, width, TailStrategy::RoundUp)
      .split(p.t, to, ti, kProjectionRows, TailStrategy::RoundUp)
      .reorder(ei, ti, eo, to, p.x, p.b)
      .vectorize(ei, lanes);
  if (parallel)
    tiles.fuse(to, p.x, tx).fuse(tx, p.b, task).parallel(task);
  p.acc.compute_at(tiles, eo).vectorize(p.e, lanes).unroll(p.e).unroll(p.t);
  p.acc.update().reorder(p.e, p.t, p.r.x).vectorize(p.e, lanes).unroll(p.e).unroll(p.t);
}

std::span<const ParamSpace> halideParamSpace() {
  return kSpace;
}

std::vector<ParamSpace> halideTuningParams(ScheduleFamily family, const Spec& spec) {
  std::vector<ParamSpace> tuned;
  for (const ParamSpace& p : kSpace) {
    // The autoschedulers are proposed as whole candidates (halideAutoscheduledCandidates),
    // not mixed into attnc's schedule by mutation. Linear attention's schedule has only chunk.
    const bool linear = spec.variant == Variant::Linear;
    const bool used =
        linear ? p.name == "chunk"
        : family == ScheduleFamily::Cuda
            ? p.name == "query_tile" || p.name == "key_block"
            : p.name != "vector_width" && p.name != "autoscheduler" && p.name != "chunk";
    if (used)
      tuned.push_back(p);
  }
  return tuned;
}

namespace {

ScheduleParams familyDefaults(ScheduleFamily family, const Spec& spec) {
  // Register budgets: the score tile holds (query_tile / vector_width) x key_unroll vectors,
  // the PV tile ceil(min(d, value_split) / vector_width) x row_unroll. Chosen by sweeping
  // `attnc compile --schedule` + `attnc bench --threads 1 --runs 5`, B=1 H=4 T=2048 f32
  // non-causal, on a 2-core AMD EPYC VM (AVX-512, 255 GFLOP/s FMA peak per core), 2026-11-21.
  if (family == ScheduleFamily::X86Avx512) {
    // Past d = 80 the head dim is merged in chunks so V's block chunk stays in L1.
    const int64_t split = spec.dV <= 80 ? 0 : spec.dV <= 128 ? 64 : 32;
    const int64_t rows = spec.dV <= 128 ? 6 : 8;
    return ScheduleParams(
        "halide",
        {{"query_tile", 48},
         {"key_block", 128},
         {"vector_width", 16},
         {"key_unroll", 8},
         {"row_unroll", rows},
         {"value_split", split},
         {"autoscheduler", 0},
         {"chunk", 64}},
        "avx512: d=64 177 GFLOP/s, d=128 182, d=256 184 (one core, AMD EPYC VM, 2026-11-21)");
  }
  if (family == ScheduleFamily::X86Avx2)
    return ScheduleParams(
        "halide",
        {{"query_tile", 24},
         {"key_block", 128},
         {"vector_width", 8},
         {"key_unroll", 4},
         {"row_unroll", 1},
         {"value_split", 0},
         {"autoscheduler", 0},
         {"chunk", 64}},
        "avx2: d=64 59 GFLOP/s, d=128 61 (one core, AMD EPYC VM running AVX2 code, 2026-11-21)");
  if (family == ScheduleFamily::Cuda) {
    // Sized so the query tile and a K/V block fit in 48 KiB of shared memory as f32 (at d = 256
    // only the K/V block does; the query is read per block).
    const int64_t rows = spec.dK <= 64 ? 64 : 32;
    const int64_t keys = spec.dK + spec.dV <= 256 ? 32 : 16;
    return ScheduleParams("halide",
                          {{"query_tile", rows},
                           {"key_block", keys},
                           {"vector_width", 4},
                           {"key_unroll", 2},
                           {"row_unroll", 1},
                           {"value_split", 0},
                           {"autoscheduler", 0}},
                          "cuda: one query row per thread, K/V blocks staged in shared memory "
                          "(not measured: no GPU)");
  }
  return ScheduleParams(
      "halide",
      {{"query_tile", 16},
       {"key_block", 128},
       {"vector_width", 4},
       {"key_unroll", 4},
       {"row_unroll", 1},
       {"value_split", 0},
       {"autoscheduler", 0},
       {"chunk", 64}},
      "neon: not measured (no AArch64 machine); sized to 32 128-bit registers like avx2's");
}

bool inSpace(const char* name, int64_t value) {
  for (const ParamSpace& p : kSpace)
    if (p.name == name)
      return std::find(p.choices.begin(), p.choices.end(), value) != p.choices.end();
  return false;
}

// Block-sparse and BigBird keep whole pattern blocks, so tiles that match them are live or dead
// whole: key blocks of one pattern block, query tiles of 32 rows (a divisor of the usual
// 32..256 blocks). BigBird, block=64, T=4096 on the 2-core EPYC: 1.35x dense x density against
// 2.2x with the dense tiles (48 x 128).
ScheduleParams alignedToPatternBlocks(ScheduleFamily family, const Spec& spec,
                                      ScheduleParams params) {
  const bool blockPattern =
      spec.masks.has(MaskKind::BigBird) || spec.masks.has(MaskKind::BlockSparse);
  const int64_t lanes = params.get("vector_width"), rows = 32;
  if (family == ScheduleFamily::Cuda || !blockPattern || !inSpace("key_block", spec.block) ||
      spec.block % rows != 0 || rows % lanes != 0)
    return params;
  const int64_t rowUnroll = rows % params.get("row_unroll") == 0 ? params.get("row_unroll") : 4;
  return params.overridden(
      {{"key_block", spec.block}, {"query_tile", rows}, {"row_unroll", rowUnroll}}, kSpace,
      params.provenance() + "; tiles aligned to the pattern's blocks");
}

} // namespace

ScheduleParams defaultHalideSchedule(ScheduleFamily family, const Spec& spec) {
  return alignedToPatternBlocks(family, spec, familyDefaults(family, spec));
}

std::vector<std::map<std::string, int64_t>> halideAutoscheduledCandidates(ScheduleFamily family,
                                                                          const Spec& spec) {
  std::vector<std::map<std::string, int64_t>> candidates;
  if (family == ScheduleFamily::Cuda || spec.variant == Variant::Linear)
    return candidates;
  const nlohmann::json defaults = defaultHalideSchedule(family, spec).toJson()["params"];
  for (int64_t autoscheduler : {1, 2, 3}) {
    candidates.push_back(defaults.get<std::map<std::string, int64_t>>());
    candidates.back()["autoscheduler"] = autoscheduler;
  }
  return candidates;
}

void checkHalideSchedule(ScheduleFamily family, const ScheduleParams& params, const Spec& spec) {
  const int64_t autoscheduler = params.get("autoscheduler");
  if (autoscheduler != 0) {
    if (family == ScheduleFamily::Cuda)
      throw UsageError("schedule: autoscheduler=" + std::to_string(autoscheduler) +
                       " is for CPU targets; on CUDA the halide backend uses its own schedule");
    // The register-tile parameters belong to attnc's schedule: with an autoscheduler they
    // would change nothing, so only their defaults are allowed (the search never wastes a
    // trial on them).
    const ScheduleParams defaults = defaultHalideSchedule(family, spec);
    for (const char* name : {"vector_width", "key_unroll", "row_unroll", "value_split"})
      if (params.get(name) != defaults.get(name))
        throw UsageError("schedule: " + std::string(name) +
                         " is a parameter of attnc's own schedule; with autoscheduler=" +
                         std::to_string(autoscheduler) + " leave it at its default (" +
                         std::to_string(defaults.get(name)) + ")");
    return;
  }
  if (family == ScheduleFamily::Cuda)
    return checkCudaSchedule(params, spec);
  auto requireMultiple = [&](const char* name, const char* of) {
    if (params.get(name) % params.get(of) != 0)
      throw UsageError("schedule: " + std::string(name) + "=" + std::to_string(params.get(name)) +
                       " must be a multiple of " + of + "=" + std::to_string(params.get(of)));
  };
  requireMultiple("query_tile", "vector_width");
  requireMultiple("query_tile", "row_unroll");
  requireMultiple("key_block", "key_unroll");
}

void scheduleAttention(AttentionStages& a, const Spec& spec, const ScheduleParams& params) {
  const int lanes = static_cast<int>(params.get("vector_width"));
  const int keys = static_cast<int>(params.get("key_unroll"));
  const int rows = static_cast<int>(params.get("row_unroll"));
  Var d = a.d, i = a.i, j = a.j, row = a.row, tile = a.tile, jj = a.jj, h = a.h, b = a.b;
  Var tileHead("tile_head"), task("task"), rowTile("row_tile"), rowInTile("row_in_tile"),
      keyTile("key_tile"), keyInTile("key_in_tile");
  RVar block = a.blocks.x;
  const TailStrategy guard = TailStrategy::GuardWithIf;

  // A task is one query tile of one head of one batch entry; its state stays in cache while
  // the loop over key blocks streams through K and V, and the task finishes its rows from it.
  // When o reads the rows in the order they were merged (no gathered rows, no heads to put
  // side by side, nothing else to read), o's tasks compute their tile's state and write o.
  // Otherwise the finished rows (d_v + 2 values each) are stored whole for their readers; that
  // round trip is a third of the state's, whose root storage cost 1.5x at T = 256.
  const bool oInTask = !a.gathered && !spec.lse && !spec.weights && spec.variant != Variant::Mha;
  Var oTile("o_tile"), oRow("o_row");
  LoopLevel taskLevel;
  if (oInTask) {
    const int queryTile = static_cast<int>(params.get("query_tile"));
    a.o.compute_root()
        .vectorize(d, lanes, guard)
        .split(i, oTile, oRow, queryTile, guard)
        .fuse(oTile, h, tileHead)
        .fuse(tileHead, b, task)
        .parallel(task);
    taskLevel = LoopLevel(a.o, task);
  } else {
    a.finished.compute_root()
        .vectorize(d, lanes, guard)
        .fuse(tile, h, tileHead)
        .fuse(tileHead, b, task)
        .parallel(task);
    taskLevel = LoopLevel(a.finished, task);
  }
  a.state.compute_at(taskLevel).vectorize(d, lanes, guard);
  // With value_split, the head dim is merged in chunks, so the part of a V block one chunk
  // reads stays in L1 across all row tiles (d = 128 x 128 keys would be 64 KB).
  const int split = static_cast<int>(params.get("value_split"));
  Var dChunk("d_chunk"), dInChunk("d_in_chunk");
  Stage merge = a.state.update();
  merge.split(row, rowTile, rowInTile, rows, guard);
  if (split > 0 && split < spec.dV)
    merge.split(d, dChunk, dInChunk, split, guard)
        .reorder(dInChunk, rowInTile, rowTile, dChunk, block, tile, h, b)
        .vectorize(dInChunk, lanes, guard);
  else
    merge.reorder(d, rowInTile, rowTile, block, tile, h, b).vectorize(d, lanes, guard);
  // The tile's query rows are read as vectors along d (the rows may be gathered), then
  // transposed a lanes x lanes square at a time (both dims vectorised: shuffles, not gathers).
  Var dOuter("d_outer"), dInner("d_inner"), rowOuter("row_outer"), rowInner("row_inner");
  a.queryRows.compute_at(taskLevel).vectorize(d, lanes, guard);
  a.query.compute_at(taskLevel)
      .split(d, dOuter, dInner, lanes, guard)
      .split(row, rowOuter, rowInner, lanes, guard)
      .reorder(rowInner, dInner, rowOuter, dOuter)
      .vectorize(rowInner)
      .vectorize(dInner);

  // Score GEMM, register-tiled: the tile's rows (vectors) by `keys` keys (broadcast from K),
  // accumulated over the head dim.
  a.masked.compute_at(a.state, block)
      .split(jj, keyTile, keyInTile, keys, guard)
      .reorder(row, keyInTile, keyTile)
      .vectorize(row, lanes)
      .unroll(row)
      .unroll(keyInTile);
  a.score.compute_at(a.masked, keyTile).vectorize(row, lanes).unroll(row).unroll(jj);
  // The elementwise mask of the blocks not wholly kept: a pass over the stored block.
  if (a.maskedKeys.defined())
    a.masked.update().reorder(row, a.maskedKeys.x).vectorize(row, lanes).unroll(row);
  a.score.update().reorder(row, jj, a.dot.x).vectorize(row, lanes).unroll(row).unroll(jj);
  // Block statistics: vector operations across rows.
  a.blockMax.compute_at(a.state, block).vectorize(row, lanes);
  a.blockMax.update().reorder(row, a.inKey.x).vectorize(row, lanes);
  a.prob.compute_at(a.state, block).vectorize(row, lanes);
  a.blockSum.compute_at(a.state, block).vectorize(row, lanes);
  a.blockSum.update().reorder(row, a.inKey.x).vectorize(row, lanes);
  // PV GEMM, register-tiled: the head dim (vectors) by `rows` rows (probabilities broadcast),
  // accumulated over the block's keys.
  a.blockAcc.compute_at(a.state, rowTile).vectorize(d, lanes, guard).unroll(row);
  a.blockAcc.update().reorder(d, row, a.inKey.x).vectorize(d, lanes, guard).unroll(d).unroll(row);

  // f16 keys and values become f32 once per block (a scalar f16 load converts slowly); f32 and
  // bf16 (a shift) are read in place. RoPE'd keys come from their own table. Gathered blocks
  // (residue order) are read in place too: the score GEMM broadcasts K element by element and
  // the PV GEMM loads whole rows of V, so a gathered row costs only its own pointer (copying
  // each block measured 4.97 ms against 4.83 at T = 4096, stride 16; gathering K and V into
  // slot order once per call, 9.5).
  const bool convertPerBlock = spec.dtype == DType::F16;
  if (a.gathered) {
    a.rowPosition.compute_at(taskLevel).vectorize(row, lanes);
    a.keyPosition.compute_at(a.state, block).vectorize(jj, lanes);
  }
  if (convertPerBlock) {
    a.keyBlock.compute_at(a.state, block).vectorize(d, lanes, guard);
    a.valueBlock.compute_at(a.state, block).vectorize(d, lanes, guard);
  }

  // Tensors are usually dense along the head dim: specialise the vector loads of K and V for that
  // (other strides take the general path, with gathers).
  if (convertPerBlock) {
    a.keyBlock.specialize(a.k.dim(0).stride() == 1);
    a.valueBlock.specialize(a.v.dim(0).stride() == 1);
  } else
    a.blockAcc.update().specialize(a.v.dim(0).stride() == 1);
  a.queryRows.specialize(a.q.dim(0).stride() == 1);
  for (Func table : a.tables)
    table.compute_root();
  for (Func table : a.perTaskTables)
    table.compute_at(taskLevel);
  if (a.rotatedKeys.defined()) // keys rotated once per call, not once per query tile
    a.rotatedKeys.compute_root().vectorize(d, lanes, guard).parallel(b);
  // Products once per call (K, V projections): parallel register-tiled GEMMs. Per query tile
  // (the query's projection): in the task, before the tile's first key block; the weights pass
  // reads the query rows too, so with weights it is one product per call as well, as it is
  // when a tile's rows are gathered.
  for (const Projection& p : a.perCall)
    scheduleProjection(p, lanes, LoopLevel::root(), true);
  for (const Projection& p : a.perQueryTile)
    if (spec.weights || a.gathered) // a gathered tile's rows are spread over the sequence
      scheduleProjection(p, lanes, LoopLevel::root(), true);
    else
      scheduleProjection(p, lanes, taskLevel, false);

  Var rows64("rows64"), rowChunk("row_chunk");
  if (spec.variant == Variant::Mha) {
    // The heads side by side, then O = heads W_O as a parallel register-tiled product, which o
    // converts to the storage type.
    Var r("r");
    a.heads.compute_root().vectorize(r, lanes, guard).parallel(i);
    scheduleProjection(a.outputProjection, lanes, LoopLevel::root(), true);
    a.o.compute_root().vectorize(d, lanes, guard).parallel(i);
  } else if (!oInTask) {
    a.o.compute_root()
      .vectorize(d, lanes, guard)
      .split(i, rowChunk, rows64, 64, guard)
      .fuse(rowChunk, h, tileHead)
      .fuse(tileHead, b, task)
      .parallel(task);
  }
  if (a.rowLse.defined())
    a.rowLse.compute_root().vectorize(i, lanes, guard).parallel(h);
  if (spec.weights) {
    a.rowNormaliser.compute_root().vectorize(i, lanes, guard).parallel(h);
    scheduleWeightsPass(a.weights, a.weightScore, a.dot.x, lanes);
    a.weightQuery.compute_at(a.weights, i);
  }
}

void scheduleWeightsPass(Func weights, Func score, RVar over, int lanes) {
  const TailStrategy guard = TailStrategy::GuardWithIf;
  Var j("j"), i("i"), h("h"), b("b"), jo("jo"), ji("ji"), task("task");
  weights.compute_root().split(j, jo, ji, lanes, guard).vectorize(ji).fuse(h, b, task).parallel(task);
  score.compute_at(weights, i).vectorize(j, lanes, guard);
  score.update().reorder(j, over).vectorize(j, lanes, guard);
}

} // namespace attnc::halide
