//===- Transforms.h - rewrites of the online-softmax form ---------------------===//
//
// The building blocks of attnc's MLIR schedules. Each narrows or lowers attn ops without
// changing what they compute; the transform-dialect ops (TransformOps/) expose them to
// schedule scripts, and the tests drive them through those ops.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMS_TRANSFORMS_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMS_TRANSFORMS_H

#include "attn/IR/AttnOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"

namespace attnc::attn {

// Where the stack buffers of the task running `op` go: the start of the enclosing scf.forall's
// body (one buffer per task), else of the enclosing function's entry block.
mlir::Block* taskStackBlock(mlir::Operation* op);

// The scale attn.pack_query multiplies a score op's query tile by: the op's scale, or 1 for an
// additive score, whose weights take the scale (the tile holds hidden rows inside tanh).
mlir::FloatAttr packingScale(ScoreOpInterface op);

// The ops around a whole-domain update's state (attn-to-online's form): the allocations, their
// online_init and online_finalize beside the update, over its domain, and the deallocations.
struct StateOps {
  llvm::SmallVector<mlir::memref::AllocOp> allocs;
  OnlineInitOp init;
  OnlineFinalizeOp finalize;
  llvm::SmallVector<mlir::Operation*> deallocs;
};

// The update's StateOps, or an error on the update naming `step` (the rewrite that needs them)
// and what is missing.
mlir::FailureOr<StateOps> findStateOps(OnlineUpdateOp update, llvm::StringRef step);

// Erases the update and its StateOps, users before definitions, once a rewrite has replaced
// them.
void eraseWithStateOps(mlir::RewriterBase& rewriter, OnlineUpdateOp update,
                       const StateOps& state);

struct QueryTiles {
  mlir::scf::ForallOp loop;              // one iteration per (batch, heads, query tile)
  mlir::Value batch, head, row, count;   // the iteration's, its first head, its tile's first
                                         // row and its rows (of each head)
};

// The task loop over a score op's domain in tiles of `rows` query rows of `headsPerTask`
// consecutive heads each, task = (b * (nh / headsPerTask) + h / headsPerTask) * tiles + tile,
// built at the builder's insertion point, which it leaves at the loop body's start.
QueryTiles forEachQueryTile(mlir::ImplicitLocOpBuilder& b, ScoreOpInterface op, int64_t rows,
                            int64_t headsPerTask = 1);

struct TiledQueries {
  mlir::scf::ForallOp loop; // one iteration per (batch, head or GQA group, query tile)
  OnlineUpdateOp update;    // the update of one query tile
};

// Tiles an update over (batch, head, query rows) by `rows` query rows, moving the state's
// init and finalize into the loop and its buffers onto the stack (memref<1x1xd_vxrows>). With
// `packHeads`, a task is one batch entry, one KV head and rows / G query rows of each of the G
// query heads of its group (G = H / H_kv), its tile's row r holding query row r / G of head
// r % G (lower_to_mma's decode tiles): each K/V row read serves every head of the group. A
// paged or quantized cache stays on the tiled update for the lowering that reads it
// (lower_to_mma; pack_query refuses it).
mlir::FailureOr<TiledQueries> tileQueries(mlir::RewriterBase& rewriter, OnlineUpdateOp update,
                                          int64_t rows, bool packHeads = false);

// Splits a whole-domain update at run time by its query rows: an scf.if on Tq <= maxRows whose
// branches each hold a copy of the update with its state ops (StateOps), so that a schedule
// tiles decoding steps and prefills apart. Returns the updates of (Tq <= maxRows, the rest).
mlir::FailureOr<std::pair<OnlineUpdateOp, OnlineUpdateOp>>
branchOnQueryRows(mlir::RewriterBase& rewriter, OnlineUpdateOp update, int64_t maxRows);

// Copies the update's query tile transposed and scaled into a stack buffer before the update
// (attn.pack_query) and makes the update read it.
mlir::FailureOr<PackQueryOp> packQuery(mlir::RewriterBase& rewriter, OnlineUpdateOp update);

struct TiledKeys {
  mlir::scf::ForOp loop;
  OnlineUpdateOp update; // the update of one key block, with max_keys = block
};

// Tiles an update of one (batch, head) along keys by `block` keys, visiting only the keys its
// mask_mod can keep for its rows (keptKeyRange, KeyRange.h: causal and window bound the range
// by the rows' positions, padding by the batch's length). Whole blocks outside the range are
// never touched; the blocks start at multiples of `block` from the update's first key (the
// first one may begin before the range, whose keys the mask then drops).
mlir::FailureOr<TiledKeys> tileKeys(mlir::RewriterBase& rewriter, OnlineUpdateOp update,
                                    int64_t block);

struct VectorOptions {
  int64_t vectorWidth = 16; // f32 lanes per vector: query rows computed side by side
  int64_t keyUnroll = 8;    // keys whose scores are accumulated at once (QK^T register tile)
  int64_t valueSplit = 8;   // output columns accumulated at once (PV register tile)
  bool amx = false;         // QK^T and PV on AMX tiles where the update allows (LowerUpdate.cpp)
  bool dot = false;         // or as vdpbf16ps dot products, from the same paired operands
};

// Lowers every attn online op (pack_query, online_init/update/finalize) under `root` to scf,
// vector, memref, arith and math ops. Updates need a packed query and max_keys.
mlir::LogicalResult lowerOnlineOpsToVectors(mlir::RewriterBase& rewriter, mlir::Operation* root,
                                            const VectorOptions& options);

// Lowers an attn.weights to an scf.forall of its own before the op (a kernel phase after the
// attention's), one task per `rows` query rows of a batch and head, the rows in vector lanes of
// options.vectorWidth and options.keyUnroll keys' scores accumulated at once.
mlir::FailureOr<mlir::scf::ForallOp> lowerWeights(mlir::RewriterBase& rewriter, WeightsOp op,
                                                  int64_t rows, const VectorOptions& options);

// The tasks of an attn.backward's lowering: `rows` query rows (a multiple of the vector
// width) per task of D and dQ, blocks of up to `keyBlock` keys in the tasks of dK and dV
// (shortened at run time where the key chunks need it, LowerBackward.cpp).
struct BackwardTiles {
  int64_t rows = 32;
  int64_t keyBlock = 64;
};

// Lowers an attn.backward to three scf.forall phases in its place (LowerBackward.cpp): D, then
// dK and dV, then dQ, each gradient written by one task and summed in a fixed order.
mlir::LogicalResult lowerBackward(mlir::RewriterBase& rewriter, BackwardOp op,
                                  const BackwardTiles& tiles, const VectorOptions& options);

// Makes the online_update and weights ops under `root` that read a paged or quantized KV cache
// (pages(...), scales(...)) read plain buffers [B, H_kv, Tk, d] instead, of the query's type
// when quantized, which a phase of their own at the start of their block fills, one task per `rows`
// positions of a sequence, or when `rows` is 0 one task per `columns` adjacent columns of a
// head at a position (GatherCache.cpp): every lowering but the decode kernels' (LowerDecode's,
// lower_to_mma's decode tiles) needs it. The phase goes into the block of the ops, which may be
// `root` itself.
mlir::LogicalResult gatherCache(mlir::RewriterBase& rewriter, mlir::Operation* root,
                                int64_t rows, int64_t columns);

// Lowers an attn.rope to an scf.forall of its own before the op, one task per `rows` rows of a
// batch, rotating them for every head (a kernel phase that completes before the next).
mlir::FailureOr<mlir::scf::ForallOp> lowerRope(mlir::RewriterBase& rewriter, RopeOp op,
                                               int64_t rows);

// An attn.matmul's register tiles: `rows` rows of out in vector lanes of `vectorWidth` f32,
// `columns` of its columns accumulated at once.
struct MatmulTiles {
  int64_t rows = 48;
  int64_t vectorWidth = 16;
  int64_t columns = 8;
};

// Lowers an attn.matmul to an scf.forall in its place: one task per `rows` rows and up to 256
// columns of out for a batch and head (a kernel phase that completes before the next).
mlir::FailureOr<mlir::scf::ForallOp> lowerMatmul(mlir::RewriterBase& rewriter, MatmulOp op,
                                                 const MatmulTiles& tiles);

// Lowers an attn.matmul to a gpu.launch in its place whose blocks multiply 64 x 64 tiles of out
// on tensor cores, TF32 mma.sync with f32 accumulators (MatmulMma.cpp): operands of any float
// type and strides, each rounded to TF32.
mlir::LogicalResult lowerMatmulToMma(mlir::RewriterBase& rewriter, MatmulOp op);

// Lowers linear attention's row ops under `root` (attn.feature_rows, favor_features,
// chunk_prefix, normalize_rows, linear_weights; AttnLinearOps.td) each to an scf.forall in its
// place: one task per `rows` rows of a (batch or chunk, head), a kernel phase that completes
// before the next.
mlir::LogicalResult lowerLinearOps(mlir::RewriterBase& rewriter, mlir::Operation* root,
                                   int64_t rows);

struct DecodeOptions {
  int64_t vectorWidth = 16; // f32 lanes per vector, along keys and the head dim
  int64_t keyBlock = 128;   // keys per online-softmax step
  int64_t rows = 4;         // query rows of each head per task
  int64_t splitKeys = 512;  // keys per split: a task's keys are split ceil(Tk / splitKeys) ways
  bool dot = false;         // bf16 products as vdpbf16ps where K and V allow (LowerDecode.cpp)
};

// Lowers the whole attention's online_update (before tiling), with its state's init and
// finalize, to the decode kernel (LowerDecode.cpp): a phase of tasks, one per batch entry, KV
// head, `rows` query rows of the group's heads and split of the keys, vectorised along keys and
// the head dim, writing partial states to a workspace; and a phase merging them per row.
mlir::LogicalResult lowerDecode(mlir::RewriterBase& rewriter, OnlineUpdateOp update,
                                const DecodeOptions& options);

struct MmaOptions {
  int64_t maxKeySplits = 1; // at most this many blocks share one task's keys (1: never split)
  int64_t fillBlocks = 256; // split until tasks x splits reaches this many blocks
};

// Lowers a task loop (tile_queries then tile_keys, query not packed) of f16 or bf16 tensors to
// a gpu.launch of one block per task running flash attention on tensor cores: 16 query rows
// per warp, K and V tiles of max_keys keys staged in shared memory by cp.async, QK^T and PV as
// nvgpu.mma.sync m16n8k16 with f32 accumulators, the online softmax in registers. With
// maxKeySplits > 1, few long tasks (decoding) split their keys over blocks and merge. A task
// loop with no online_update (another phase, such as a paged cache's gather) is left as it is.
mlir::LogicalResult lowerTasksToMma(mlir::RewriterBase& rewriter, mlir::scf::ForallOp tasks,
                                    const MmaOptions& options);

// Lowers an attn.backward of f16 or bf16 tensors to tensor-core kernels in its place
// (MmaBackward.cpp): a gpu.launch of blocks of tiles.rows query rows forming D and dQ, then one
// of blocks of tiles.rows keys forming dK and dV, streaming tiles.keyBlock keys or query rows
// through shared memory; with sinks, a task loop per head of their gradients.
mlir::LogicalResult lowerBackwardToMma(mlir::RewriterBase& rewriter, BackwardOp op,
                                       const BackwardTiles& tiles);

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_TRANSFORMS_H
