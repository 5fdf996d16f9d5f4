//===- LowerDecode.cpp - few query rows against many keys (flash-decoding) -----===//
//
// Decoding attends one to a few query rows per head against thousands of keys, so the prefill
// kernel's tiles (query rows in vector lanes) would use 1/16 of each vector, and each query
// head of a GQA group would read the shared keys and values again. Here a task is one batch
// entry, one KV head g, `rows` query rows of each of the group's G query heads (R = G x rows
// rows) and one split of the keys; vectors run along the head dim, and every K and V row the
// task reads from memory serves all R rows:
//
//   1. S[r, j] = q_r . k_j     register tiles of R' rows x W / R' keys (R' = min(G, 8), or 8
//                              when R >= 4): W accumulators of W lanes along d, reduced to
//                              one vector of W scores by a transposing add tree
//   2. S[r, :] = mask(modifiers(S[r, :])), W keys per vector (ScoreTerms, at the row's head)
//      m'_r = max(m_r, max_j S[r, j]),  P[r, j] = exp(S[r, j] - m'_r - c)
//      l'_r = e^(m_r - m'_r) l_r + sum_j P[r, j]                     (c: OnlineSoftmax.h)
//   3. A[r, :] = e^(m_r - m'_r) A[r, :] + sum_j D[r, j] P[r, j] v_j  (D: dropout's factor)
//                              register tiles of QK^T's rows x 16 / rows vectors of d_v
//                              (at most 8; 2 rows where a head's rows lie apart)
//
// over the key blocks of the task's split of the range its mask can keep (KeyRange.h). Each
// split writes its unnormalised (m, l, A) to a workspace, and a second phase merges the splits
// of each row: M = max_s m_s, w_s = e^(m_s - M), L = sum_s w_s l_s, o = sum_s w_s A_s / L,
// lse = M + c + log L. The split count is ceil(Tk / split_keys), raised to make kMinTasks
// tasks, at most kMaxSplits and the key blocks of Tk.
//
// With DecodeOptions::dot, bf16 K and V of unit inner stride take both products as AVX512-BF16
// dot products (vdpbf16ps, Semantics/PairedProducts.h), q and P rounded to bf16: in 1, q_r's
// and k_j's 32 bf16 of a chunk as they lie (each lane sums two products), q unscaled (exact in
// bf16) and the sums times the scale in f32, as FlashAttention does; in 3, the V rows of
// keys j and j + 1 interleaved (vpunpck{l,h}wd: lane l of a 32-column chunk's low half holds
// columns 8(l / 4) + l mod 4, the high half's 4 more), P's pair (j, j + 1) broadcast, A's
// columns put in that order before the key loop and back after it.
//
//===---------------------------------------------------------------------------===//
#include "attn/IR/AttnOps.h"
#include "attn/Kit/Builders.h"
#include "attn/Kit/CacheRows.h"
#include "attn/Kit/Elements.h"
#include "attn/Kit/OnlineState.h"
#include "attn/Kit/Products.h"
#include "attn/Transforms/KeyRange.h"
#include "attn/Transforms/ScoreTerms.h"
#include "attn/Transforms/Transforms.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <bit>
#include <limits>
#include <numeric>

using namespace mlir;

namespace attnc::attn {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// QK^T's register tiles take up to kMaxScoreRows rows x W / rows keys, so each K chunk is
// widened once for up to 8 rows (GQA 64/8, d 128, f16, Tk 16k: 1.12-1.18x as fast as 4 rows);
// PV's as many rows x kPvAccumulators / rows vectors of d_v (at most kPvVectors), or, where a
// head's rows of consecutive keys lie apart (pvRowsFor), at most kScatteredPvRows rows
// (DecodeLowering's groupTiles and wideTiles).
constexpr int64_t kMaxScoreRows = 8;
constexpr int64_t kPvAccumulators = 16;
constexpr int64_t kPvVectors = 8;
constexpr int64_t kScatteredPvRows = 2;
// At most this many splits share one task's keys: the merge reads them all per row.
constexpr int64_t kMaxSplits = 64;
// Splits are raised until the tasks are at least this many, so a batch of one sequence with
// few KV heads keeps every core of a server busy.
constexpr int64_t kMinTasks = 32;

int64_t roundUp(int64_t x, int64_t to) {
  return (x + to - 1) / to * to;
}

// `lanes` consecutive elements of the innermost dim of `buffer` from `indices` as f32
// (toF32Unscaled: an int8 cache's as signed integers, an fp8 one's decoded to 2^-8 its value,
// the 256 folded into the rows' scales by the callers): one vector load when the chunk is
// `whole` (inside the row) and the buffer `contiguous` (unit innermost stride), else element by
// element with the column clamped into the row of `rowLength`.
Value loadRow(ImplicitLocOpBuilder& b, Value buffer, ValueRange indices, int64_t lanes,
              bool contiguous, bool whole, int64_t rowLength) {
  Type element = cast<MemRefType>(buffer.getType()).getElementType();
  SmallVector<Value> at(indices.begin(), indices.end());
  if (contiguous && whole)
    return toF32Unscaled(
        b, b.create<vector::LoadOp>(VectorType::get({lanes}, element), buffer, at));
  Value result = f32Splat(b, lanes, 0);
  Value base = at.back();
  for (int64_t lane = 0; lane < lanes; ++lane) {
    at.back() = b.create<arith::MinSIOp>(b.create<arith::AddIOp>(base, indexConstant(b, lane)),
                                         indexConstant(b, rowLength - 1));
    result = b.create<vector::InsertOp>(
        toF32Unscaled(b, b.create<memref::LoadOp>(buffer, at)), result, lane);
  }
  return result;
}

// body(i, carried) for i in [0, count), each returning the next carried values: unrolled up to
// kUnrolledChunks iterations (the head dims of real models), an scf.for past them (so a head dim
// of 32768 compiles in seconds).
constexpr int64_t kUnrolledChunks = 16;
SmallVector<Value> overChunks(
    ImplicitLocOpBuilder& b, int64_t count, ValueRange init,
    function_ref<SmallVector<Value>(ImplicitLocOpBuilder&, Value, ValueRange)> body) {
  SmallVector<Value> carried(init.begin(), init.end());
  if (count <= kUnrolledChunks) {
    for (int64_t i = 0; i < count; ++i)
      carried = body(b, indexConstant(b, i), carried);
    return carried;
  }
  auto loop = b.create<scf::ForOp>(
      indexConstant(b, 0), indexConstant(b, count), indexConstant(b, 1), init,
      [&](OpBuilder& nested, Location loc, Value i, ValueRange running) {
        ImplicitLocOpBuilder ib(loc, nested);
        ib.create<scf::YieldOp>(body(ib, i, running));
      });
  return SmallVector<Value>(loop.getResults().begin(), loop.getResults().end());
}

// The largest divisor of n up to `most` (at least 1).
int64_t divisorUpTo(int64_t n, int64_t most) {
  for (int64_t d = std::min(n, most); d > 1; --d)
    if (n % d == 0)
      return d;
  return 1;
}

// The vector whose lane u is the sum of the lanes of vectors[u] (W vectors of W lanes): pairs
// of vectors halve their partial sums at each level, 3 (W - 1) shuffles and adds in all.
Value transposeReduce(ImplicitLocOpBuilder& b, SmallVector<Value> vectors) {
  const int64_t lanes = cast<VectorType>(vectors.front().getType()).getNumElements();
  // Each vector holds `sources` sources of `partials` partial sums each, in order.
  for (int64_t partials = lanes; partials > 1; partials /= 2) {
    const int64_t sources = lanes / partials, half = partials / 2;
    SmallVector<int64_t> low, high;
    for (int64_t from : {int64_t{0}, lanes})
      for (int64_t s = 0; s < sources; ++s)
        for (int64_t p = 0; p < half; ++p) {
          low.push_back(from + s * partials + p);
          high.push_back(from + s * partials + half + p);
        }
    SmallVector<Value> next;
    for (size_t v = 0; v + 1 < vectors.size(); v += 2) {
      Value lo = b.create<vector::ShuffleOp>(vectors[v], vectors[v + 1], low);
      Value hi = b.create<vector::ShuffleOp>(vectors[v], vectors[v + 1], high);
      next.push_back(b.create<arith::AddFOp>(lo, hi));
    }
    vectors = next;
  }
  return vectors.front();
}

// The rows of the register tiles of QK^T (score) and PV (values).
struct RowTiles {
  int64_t score, values;
  int64_t most() const { return std::max(score, values); }
};

// Whether a head's K and V rows of consecutive keys lie H_kv rows apart: the positions before
// the heads in memory (SpecToAttn's transpose: a paged cache's nhd pages, bshd K and V).
bool positionsBeforeHeads(OnlineUpdateOp op) {
  return static_cast<bool>(op.getKey().getDefiningOp<memref::TransposeOp>());
}

// PV's tile rows beside QK^T's `scoreRows`: as many, so each V chunk is widened once for all
// of them (on Intel cores widening f16 takes an FMA port and a shuffle port: GQA 64/8 in 8 x 2
// tiles, d 128, f16, Tk 16k, 1 thread, the Xeon of docs/benchmarks.md, 1.09-1.10x as fast as
// 2 x 8 warm, 1.02-1.05x with the caches flushed; 32/8 in 4 x 4 1.0-1.02x, at Tq 4 1.07x;
// the EPYC measured 8 x 2 at 0.95-0.96x of the work, its caches-flushed time within 1.0-1.1x).
// Rows lying apart keep tiles of whole rows: narrower tiles pass over each row once per column
// tile, and every pass over rows scattered H_kv rows apart misses again (paged nhd pages of 16,
// 32/8: 4 x 4 1.15-1.2x slower).
int64_t pvRowsFor(int64_t scoreRows, bool rowsApart) {
  return rowsApart ? std::min(scoreRows, kScatteredPvRows) : scoreRows;
}

// The tiles of a task of one row per head: QK^T's take up to the GQA group's G rows.
RowTiles groupRowTiles(int64_t group, int64_t lanes, bool rowsApart) {
  const int64_t rows = std::min<int64_t>(
      {kMaxScoreRows, lanes, static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(group)))});
  return {rows, pvRowsFor(rows, rowsApart)};
}

// Tiles of kMaxScoreRows rows (within the vector's lanes) when they are wider than `narrow`
// and a task of at most `mostRows` rows can fill them.
std::optional<RowTiles> wideRowTiles(RowTiles narrow, int64_t lanes, int64_t mostRows,
                                     bool rowsApart) {
  const int64_t rows = std::min(kMaxScoreRows, lanes);
  if (narrow.score >= rows || mostRows < rows)
    return std::nullopt;
  return RowTiles{rows, pvRowsFor(rows, rowsApart)};
}

class DecodeProducts;

class DecodeLowering {
public:
  DecodeLowering(RewriterBase& rewriter, OnlineUpdateOp op, const DecodeOptions& options)
      : rewriter(rewriter), op(op), lanes(options.vectorWidth), keyBlock(options.keyBlock),
        rowsPerHead(options.rows), splitKeys(options.splitKeys),
        heads(static_cast<int64_t>(op.getNumHeads())), kvHeads(op.getKey().getType().getDimSize(1)),
        group(heads / kvHeads), dk(op.getKey().getType().getDimSize(3)),
        dv(op.getValue().getType().getDimSize(3)), dkPadded(roundUp(dk, lanes)),
        dvPadded(roundUp(dv, lanes)), rowsApart(positionsBeforeHeads(op)),
        pairs(options.dot && lanes == 16 && !op.getKeyScale() && !op.getValueScale() &&
              op.getKey().getType().getElementType().isBF16() &&
              op.getValue().getType().getElementType().isBF16() && dk % (2 * lanes) == 0 &&
              dv % (2 * lanes) == 0),
        groupTiles(groupRowTiles(group, lanes, rowsApart)),
        wideTiles(wideRowTiles(groupTiles, lanes, group * rowsPerHead, rowsApart)),
        taskRows(roundUp(group * rowsPerHead, (wideTiles ? *wideTiles : groupTiles).most())),
        keysAhead(rowsApart ? std::max<int64_t>(1, keyBlock / kvHeads) : keyBlock),
        vector(VectorType::get({lanes}, rewriter.getF32Type())),
        vectorI32(VectorType::get({lanes}, rewriter.getI32Type())) {}

  LogicalResult emit();

private:
  friend class DecodeProducts;
  friend class WidenedDecodeProducts;
  friend class DotDecodeProducts;

  // What the decode kernel takes: a power-of-two vector width, positive sizes, the whole
  // attention (before tiling) with static KV heads dividing the heads.
  LogicalResult check();
  // The splits and the workspace of their partial states; returns B.
  Value emitWorkspace(ImplicitLocOpBuilder& b);
  // `buffer` ([.., d], K or V) with its innermost stride stated as 1 into `view`, and an i1,
  // whether it is 1.
  Value unitInnermost(ImplicitLocOpBuilder& b, Value buffer, Value& view);
  // Phase 1: the splits' partial states; phase 2: their merge, where the update was.
  void emitPhases(ImplicitLocOpBuilder& at, Value batches);
  // The task loop's body: one (batch, KV head, query rows, split).
  void emitPartial(ImplicitLocOpBuilder& b, Value task);
  // The task's place (batch, KV head, rows, split), the update over its domain (taskOp) and
  // its cache's rows.
  void placeTask(ImplicitLocOpBuilder& b, Value task);
  // The task's stack: the rows' scaled queries, scores, state and the block's rescale factors.
  void allocateTaskStack(ImplicitLocOpBuilder& b);
  // An i1, whether the task takes wideTiles, or null without them.
  Value wideTilesWanted(ImplicitLocOpBuilder& b);
  // The rows' queries packed and their state initialised, up to whole tiles.
  void emitTaskInit(ImplicitLocOpBuilder& b, Value useWide);
  void packQueryRow(ImplicitLocOpBuilder& b, Value r);
  // The split's key blocks, with the tiles the task takes and the layout K and V have.
  void emitKeyBlocks(ImplicitLocOpBuilder& b, Value useWide);
  // The split's unnormalised state of the task's rows into the workspace.
  void storePartialState(ImplicitLocOpBuilder& b);
  // One key block [j0, j0 + count) folded into the task's state, K and V read with vector loads
  // when `contiguous`.
  void emitBlock(ImplicitLocOpBuilder& b, Value j0, Value count, bool contiguous,
                 RowTiles tiles);
  void emitScores(ImplicitLocOpBuilder& b, Value j0, Value count, bool contiguous,
                  int64_t scoreRows);
  // A register tile of QK^T in emitScores: K (or its view), its rows (`rowIndices`, the task's
  // rows from a multiple of `rows`), its keys per group, its pass over the block and the
  // passes of a block (prefetchNext), the last key, and whether a row's keys go one by one.
  struct ScoreTile {
    Value kv;
    bool contiguous, keyByKey;
    int64_t rows, keys, passes;
    SmallVector<Value> rowIndices;
    Value pass, lastKey;
  };
  using KeyRows = ArrayRef<std::pair<Value, Value>>;
  // The scores of key group `keyGroup` of the block from j0 for the tile's rows.
  void emitScoreGroup(ImplicitLocOpBuilder& gb, const ScoreTile& tile, Value j0, Value keyGroup);
  // Key u of the group from firstKey, clamped into K (the softmax drops the scores of a partial
  // group's keys past the block).
  std::pair<Value, Value> groupKey(ImplicitLocOpBuilder& b, const ScoreTile& tile,
                                   Value firstKey, Value u);
  // A quantized cache's scales of `keys` as one vector, or null.
  Value keyScalesOf(ImplicitLocOpBuilder& gb, const ScoreTile& tile, KeyRows keys);
  // q_rr . k_u for the tile's rows and the keys `over`, as W-lane partial sums.
  SmallVector<Value> keyDots(ImplicitLocOpBuilder& db, const ScoreTile& tile, KeyRows over);
  SmallVector<Value> widenedDotChunk(ImplicitLocOpBuilder& cb, const ScoreTile& tile, Value c,
                                     ValueRange running, bool whole, KeyRows over);
  SmallVector<Value> pairDotChunk(ImplicitLocOpBuilder& cb, const ScoreTile& tile, Value c,
                                  ValueRange running, KeyRows over);
  // The group's reduced scores `s` into S, scaled.
  void storeGroupScores(ImplicitLocOpBuilder& gb, const ScoreTile& tile, Value s,
                        Value keyScales, Value firstColumn);
  void emitSoftmax(ImplicitLocOpBuilder& b, Value j0, Value count);
  void emitValues(ImplicitLocOpBuilder& b, Value j0, Value count, bool contiguous,
                  int64_t pvRows);
  // PV's register tiles in emitValues over the block [j0, j0 + count): V (or its view), the
  // tiles' rows and vectors of columns (`width`), the column tiles of a row tile and the
  // passes over the block (prefetchNext).
  struct ValueTiles {
    Value kv, j0, count;
    bool contiguous;
    int64_t rows, width, columnTiles, passes;
  };
  // One tile: its pass over the block, its rows and its columns' first elements.
  struct ValueTile {
    Value pass;
    SmallVector<Value> rows, columns;
  };
  ValueTile tileAt(ImplicitLocOpBuilder& tb, const ValueTiles& tiles, Value r0, Value columnTile,
                   Value firstVector, int64_t width);
  // acc = alpha acc + P V for the tile, V widened (a `whole` chunk of columns, or the last).
  void emitValueTile(ImplicitLocOpBuilder& tb, const ValueTiles& tiles, const ValueTile& at,
                     bool whole);
  // The shuffles of the dot products' PV: A's columns into pair order and back, and two keys'
  // V rows interleaved.
  struct PairOrder {
    SmallVector<int64_t> toLow, toHigh, interleaveLow, interleaveHigh, back[2];
  };
  PairOrder pairOrder() const;
  void emitPairValueTile(ImplicitLocOpBuilder& tb, const ValueTiles& tiles, const ValueTile& at);
  // Keys j and j + 1 of the block (j alone: the second row zero) into the tile's accumulators.
  SmallVector<Value> pairValueStep(ImplicitLocOpBuilder& jb, const ValueTiles& tiles,
                                   const ValueTile& at, const PairOrder& order, Value j,
                                   ValueRange running, bool alone);
  // The merge phase's body: the splits of every query row of one batch entry and head.
  void emitMerge(ImplicitLocOpBuilder& b, Value task);
  // Row r of the task (0 <= r < taskRows): its head and query row; rows past the task's last
  // repeat it (their results are never stored).
  std::pair<Value, Value> rowAt(ImplicitLocOpBuilder& b, Value r);
  // Where the task's key `key` lies in K and V: the first and third of their indices
  // [outer, kvHead, row, column], (batch, key), or in a paged cache (page, key mod page_size)
  // with page = block_table[batch, key / page_size] clamped into the cache (the keys of a
  // chunk past the sequence's end read some page; the mask drops their scores).
  std::pair<Value, Value> keyAt(ImplicitLocOpBuilder& b, Value key);
  // Prefetches, for key `key` + keysAhead (clamped to the last key), the lines of its K and V
  // rows that fall to `phase`'s pass `pass` (phaseLines, split evenly over the `passes` a step
  // of one row per head makes: more rows make more passes, the extra ones prefetching nothing).
  //
  // Why: a block's QK^T reads K, its PV reads V, and with GQA each phase makes several passes
  // over the block's rows (one per register tile), the passes after the first from the
  // caches. The hardware's prefetchers run a little ahead of the demand loads, so memory sat
  // idle through those passes and the softmax, and the time was nearly the sum of the reads
  // and the work. Requests for the next block spread over every pass keep memory busy while
  // the core computes (a C++ probe of GQA 32/8, d 128, f16, Tk 16k, 1 thread, the EPYC: 3.4 ->
  // 2.3 ms; the kernel 1.23-1.37x as fast). Half of both streams in each phase, not each
  // phase's own: an Intel core reads one stream at 9.9-10.6 GB/s and two at 12.5-13.0 (a C++
  // probe of the 64 MB of K and V, the Xeon of docs/benchmarks.md), and there the kernel ran
  // 1.07-1.20x as fast with 1 and 2 threads (GQA 1, 4 and 8, f16 and bf16, paged hnd pages);
  // one row per KV head, which had prefetched nothing (each phase's own stream: 1.05x slower
  // on the EPYC, the same on the Xeon), 1.15-1.21x. A paged cache's next page lies anywhere,
  // where the hardware's prefetchers do not look. Rows H_kv rows apart (nhd pages) come one
  // by one, and prefetched a key block ahead they were 1.1x slower than 32 keys ahead
  // (keysAhead; H_kv 8); there both streams in both phases were 1.15x slower. The distance is
  // a constant: computed from the strides at run time it cost the contiguous cache 8% (a
  // group's keys no longer share a known page or row arithmetic). The lines of a pass are a
  // count known when compiling, which keeps the key loops free of a loop over lines (GQA
  // 64/8: the loop cost 5%).
  enum class Phase { Scores, Values };
  void prefetchNext(ImplicitLocOpBuilder& b, Phase phase, Value key, Value pass, int64_t passes);
  // The lines [first, first + count) of `buffer`'s rows (K or V) `phase` prefetches: a key
  // block ahead, the first half of both K's and V's in QK^T and the rest in PV. Nearer than a
  // block (rows apart), the rows prefetched are the block's own, so QK^T prefetches every line
  // of K and PV every line of V, all in the phase's first pass (nhd pages: PV's loads of the
  // rows' second half were where the time stalled, shared).
  struct Lines {
    int64_t first, count;
  };
  Lines phaseLines(Value buffer, Phase phase);
  Value workspaceRow(ImplicitLocOpBuilder& b, Value batch, Value head, Value i) {
    return b.create<arith::AddIOp>(
        b.create<arith::MulIOp>(
            b.create<arith::AddIOp>(b.create<arith::MulIOp>(batch, indexConstant(b, heads)), head),
            seqQ),
        i);
  }
  Value i32(ImplicitLocOpBuilder& b, Value index) {
    return b.create<arith::IndexCastOp>(b.getI32Type(), index);
  }
  Value iota(ImplicitLocOpBuilder& b) {
    SmallVector<int32_t> lanesIota(lanes);
    std::iota(lanesIota.begin(), lanesIota.end(), 0);
    return b.create<arith::ConstantOp>(
        DenseElementsAttr::get(vectorI32, ArrayRef<int32_t>(lanesIota)));
  }

  RewriterBase& rewriter;
  OnlineUpdateOp op;
  const int64_t lanes, keyBlock, rowsPerHead, splitKeys, heads, kvHeads, group, dk, dv,
      dkPadded, dvPadded;
  const bool rowsApart; // positionsBeforeHeads
  // bf16 K and V whose products can go as dot products (vdpbf16ps): d_k and d_v in whole
  // chunks of 2W, no scales; taken where the run-time check finds unit inner strides.
  const bool pairs;
  // Register tiles sized by the GQA group G, not by Tq (a step of one row is the common case),
  // and, for tasks of more rows than those hold and at least kMaxScoreRows / 2 (several query
  // rows per head: speculative decoding, short chunks), tiles of kMaxScoreRows rows, each K and
  // V chunk widened once for them (emitPartial picks per task; H 8, d 128, f16, Tk 16k: Tq 8
  // and 16 1.6-1.7x as fast, H 32/8 Tq 2 1.16-1.35x, Tq 4 to 16 1.0-1.1x).
  const RowTiles groupTiles;
  const std::optional<RowTiles> wideTiles;
  const int64_t taskRows;
  // How many keys ahead prefetchNext reads: a key block, or with a head's rows lying H_kv rows
  // apart (rowsApart), the same bytes of them: keyBlock / H_kv keys.
  const int64_t keysAhead;
  VectorType vector, vectorI32;

  // Kernel-level values.
  Value seqQ, seqK, queryTiles, splits, contiguousKv, keyView, valueView;
  Value workAcc, workMax, workSum;
  // The task's.
  Value batch, kvHead, firstRow, headRows, rowCount, split;
  std::optional<CacheRows> cache; // K's and V's rows, where keyAt finds a key
  OnlineFinalizeOp finalize; // the whole attention's, whose output and lse the merge writes
  OnlineUpdateOp taskOp; // the update over the task's domain, read by KeyRange and ScoreTerms
  Value query, scores, acc, rowMax, rowSum, alpha;
  Value queryPairs, probabilityPairs; // pairs: q and P rounded to bf16
  Value partials; // one row's partial sums of a key group, key by key (emitScores)
  const OnlineState softmax;
  DecodeProducts* blockProducts = nullptr; // the blocks' way of multiplying (emitKeyBlocks)
};

// The decode kernel's way of multiplying in a block's steps, chosen once per layout of K and V
// (emitKeyBlocks): FMAs on widened values, or AVX512-BF16 dot products where bf16 K and V have
// unit inner strides (DecodeLowering::pairs). The steps call it and never ask which it is.
class DecodeProducts {
public:
  explicit DecodeProducts(DecodeLowering& d) : d(d) {}
  virtual ~DecodeProducts() = default;
  // q_rr . k_u for the tile's rows and the keys `over`, as W-lane partial sums.
  virtual SmallVector<Value> keyDots(ImplicitLocOpBuilder& db,
                                     const DecodeLowering::ScoreTile& tile,
                                     DecodeLowering::KeyRows over) = 0;
  // A row's scores of `keys` keys as the terms take them.
  virtual Value scaled(ImplicitLocOpBuilder& gb, Value part, int64_t keys) { return part; }
  // Key group `first` of row r's probabilities P, in S already, where PV reads them too.
  virtual void storeProbabilities(ImplicitLocOpBuilder& kb, Value p, Value r, Value first) {}
  // The vectors of d_v a PV tile holds: of `wholeVectors`, at most `most`.
  virtual int64_t valueWidth(int64_t wholeVectors, int64_t most) = 0;
  // PV for a tile of whole vectors of d_v.
  virtual void valueTile(ImplicitLocOpBuilder& tb, const DecodeLowering::ValueTiles& tiles,
                         const DecodeLowering::ValueTile& at) = 0;

protected:
  DecodeLowering& d;
};

// FMAs on K and V widened to f32, a chunk of W elements of the head dim at a time: the whole
// chunks, then the one the head dim ends in (q is zero past d_k).
class WidenedDecodeProducts final : public DecodeProducts {
public:
  using DecodeProducts::DecodeProducts;
  SmallVector<Value> keyDots(ImplicitLocOpBuilder& db, const DecodeLowering::ScoreTile& tile,
                             DecodeLowering::KeyRows over) override {
    SmallVector<Value> zeros(tile.rows * over.size(), f32Splat(db, d.lanes, 0));
    SmallVector<Value> sums = overChunks(
        db, d.dk / d.lanes, zeros, [&](ImplicitLocOpBuilder& cb, Value c, ValueRange running) {
          return d.widenedDotChunk(cb, tile, c, running, /*whole=*/true, over);
        });
    if (d.dk % d.lanes != 0)
      sums = d.widenedDotChunk(db, tile, indexConstant(db, d.dk / d.lanes), sums,
                               /*whole=*/false, over);
    return sums;
  }
  int64_t valueWidth(int64_t wholeVectors, int64_t most) override {
    return divisorUpTo(wholeVectors, most);
  }
  void valueTile(ImplicitLocOpBuilder& tb, const DecodeLowering::ValueTiles& tiles,
                 const DecodeLowering::ValueTile& at) override {
    d.emitValueTile(tb, tiles, at, /*whole=*/true);
  }
};

// vdpbf16ps on q's and K's chunks of 2W bf16 as they lie (q unscaled, exact in bf16, the sums
// scaled in f32), and on two keys' V rows interleaved against P's pairs (P rounded to bf16).
// The vectors of d_v go in pairs (a 32-column chunk of two keys' rows).
class DotDecodeProducts final : public DecodeProducts {
public:
  using DecodeProducts::DecodeProducts;
  SmallVector<Value> keyDots(ImplicitLocOpBuilder& db, const DecodeLowering::ScoreTile& tile,
                             DecodeLowering::KeyRows over) override {
    SmallVector<Value> zeros(tile.rows * over.size(), f32Splat(db, d.lanes, 0));
    return overChunks(db, d.dk / (2 * d.lanes), zeros,
                      [&](ImplicitLocOpBuilder& cb, Value c, ValueRange running) {
                        return d.pairDotChunk(cb, tile, c, running, over);
                      });
  }
  Value scaled(ImplicitLocOpBuilder& gb, Value part, int64_t keys) override {
    return gb.create<arith::MulFOp>(part, f32Splat(gb, keys, d.op.getScale().convertToDouble()));
  }
  void storeProbabilities(ImplicitLocOpBuilder& kb, Value p, Value r, Value first) override {
    kb.create<vector::StoreOp>(roundToBf16(kb, p), d.probabilityPairs, ValueRange{r, first});
  }
  int64_t valueWidth(int64_t wholeVectors, int64_t most) override {
    return 2 * divisorUpTo(wholeVectors / 2, std::max<int64_t>(1, most / 2));
  }
  void valueTile(ImplicitLocOpBuilder& tb, const DecodeLowering::ValueTiles& tiles,
                 const DecodeLowering::ValueTile& at) override {
    d.emitPairValueTile(tb, tiles, at);
  }
};

std::pair<Value, Value> DecodeLowering::keyAt(ImplicitLocOpBuilder& b, Value key) {
  return cache->place(b, batch, key);
}

// Elements of `buffer` in a 64-byte cache line.
int64_t elementsPerLine(Value buffer) {
  return 64 * 8 / cast<MemRefType>(buffer.getType()).getElementTypeBitWidth();
}

DecodeLowering::Lines DecodeLowering::phaseLines(Value buffer, Phase phase) {
  const bool isKey = buffer == op.getKey();
  const int64_t lines = llvm::divideCeil(isKey ? dk : dv, elementsPerLine(buffer));
  if (rowsApart)
    return {0, (phase == Phase::Scores) == isKey ? lines : 0};
  const int64_t firstHalf = llvm::divideCeil(lines, 2);
  return phase == Phase::Scores ? Lines{0, firstHalf} : Lines{firstHalf, lines - firstHalf};
}

void DecodeLowering::prefetchNext(ImplicitLocOpBuilder& b, Phase phase, Value key, Value pass,
                                  int64_t passes) {
  struct Stream {
    Value buffer;
    Lines lines;
    int64_t perPass;
  };
  SmallVector<Stream> streams;
  int64_t activePasses = 0; // the passes with lines to prefetch
  for (Value buffer : {op.getKey(), op.getValue()}) {
    const Lines lines = phaseLines(buffer, phase);
    if (lines.count == 0)
      continue;
    const int64_t perPass = rowsApart ? lines.count : llvm::divideCeil(lines.count, passes);
    activePasses = std::max<int64_t>(activePasses, llvm::divideCeil(lines.count, perPass));
    streams.push_back({buffer, lines, perPass});
  }
  if (streams.empty())
    return;
  auto active = b.create<scf::IfOp>(
      b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, pass, indexConstant(b, activePasses)),
      /*withElseRegion=*/false);
  auto ab = ImplicitLocOpBuilder::atBlockTerminator(b.getLoc(), active.thenBlock());
  Value lastKey = ab.create<arith::SubIOp>(seqK, indexConstant(ab, 1));
  auto [outer, row] = keyAt(
      ab, ab.create<arith::MinUIOp>(ab.create<arith::AddIOp>(key, indexConstant(ab, keysAhead)),
                                    lastKey));
  for (const Stream& stream : streams) {
    const int64_t perLine = elementsPerLine(stream.buffer);
    Value firstLine =
        ab.create<arith::AddIOp>(indexConstant(ab, stream.lines.first),
                                 ab.create<arith::MulIOp>(pass, indexConstant(ab, stream.perPass)));
    Value lastLine = indexConstant(ab, stream.lines.first + stream.lines.count - 1);
    for (int64_t l = 0; l < stream.perPass; ++l) {
      Value line = ab.create<arith::MinUIOp>(
          ab.create<arith::AddIOp>(firstLine, indexConstant(ab, l)), lastLine);
      Value column = ab.create<arith::MulIOp>(line, indexConstant(ab, perLine));
      ab.create<memref::PrefetchOp>(stream.buffer, ValueRange{outer, kvHead, row, column},
                                    /*isWrite=*/false, /*localityHint=*/3, /*isDataCache=*/true);
    }
  }
}

std::pair<Value, Value> DecodeLowering::rowAt(ImplicitLocOpBuilder& b, Value r) {
  Value row = b.create<arith::MinUIOp>(r, b.create<arith::SubIOp>(rowCount, indexConstant(b, 1)));
  Value head = b.create<arith::AddIOp>(b.create<arith::MulIOp>(kvHead, indexConstant(b, group)),
                                       b.create<arith::DivUIOp>(row, headRows));
  Value i = b.create<arith::AddIOp>(firstRow, b.create<arith::RemUIOp>(row, headRows));
  return {head, i};
}

void DecodeLowering::emitScores(ImplicitLocOpBuilder& b, Value j0, Value count,
                                bool contiguous, int64_t scoreRows) {
  ScoreTile tile;
  tile.kv = contiguous ? keyView : op.getKey();
  tile.contiguous = contiguous;
  tile.lastKey = b.create<arith::SubIOp>(seqK, indexConstant(b, 1));
  // A register tile: scoreRows rows x keysPerTile keys, W accumulators in all, so each K chunk
  // loaded (and widened) serves scoreRows rows. The key groups loop inside the row blocks: the
  // other way round, a K group's chunks (invariant in the row loop) were hoisted out of it by
  // LLVM and spilled, a store and a load more per chunk.
  tile.rows = scoreRows;
  tile.keys = lanes / scoreRows;
  tile.passes = llvm::divideCeil(group, scoreRows);
  tile.keyByKey = scoreRows == 1 && partials; // emitPartial allocates partials for it
  Value groups = b.create<arith::CeilDivUIOp>(count, indexConstant(b, tile.keys));
  b.create<scf::ForOp>(
      indexConstant(b, 0), rowCount, indexConstant(b, scoreRows), std::nullopt,
      [&](OpBuilder& nested, Location loc, Value r0, ValueRange) {
        ImplicitLocOpBuilder rb(loc, nested);
        tile.pass = rb.create<arith::DivUIOp>(r0, indexConstant(rb, scoreRows));
        tile.rowIndices.clear();
        for (int64_t rr = 0; rr < scoreRows; ++rr)
          tile.rowIndices.push_back(rb.create<arith::AddIOp>(r0, indexConstant(rb, rr)));
        forRange(rb, indexConstant(rb, 0), groups, [&](ImplicitLocOpBuilder& gb, Value keyGroup) {
          emitScoreGroup(gb, tile, j0, keyGroup);
        });
        rb.create<scf::YieldOp>();
      });
}

std::pair<Value, Value> DecodeLowering::groupKey(ImplicitLocOpBuilder& b, const ScoreTile& tile,
                                                 Value firstKey, Value u) {
  return keyAt(b, b.create<arith::MinUIOp>(b.create<arith::AddIOp>(firstKey, u), tile.lastKey));
}

void DecodeLowering::emitScoreGroup(ImplicitLocOpBuilder& gb, const ScoreTile& tile, Value j0,
                                    Value keyGroup) {
  Value firstColumn = gb.create<arith::MulIOp>(keyGroup, indexConstant(gb, tile.keys));
  Value firstKey = gb.create<arith::AddIOp>(j0, firstColumn);
  // The group's keys at once, but for one row read key by key (which has no scales: quantized
  // rows keep the unrolled group).
  SmallVector<std::pair<Value, Value>> keys;
  if (!tile.keyByKey)
    for (int64_t u = 0; u < tile.keys; ++u)
      keys.push_back(groupKey(gb, tile, firstKey, indexConstant(gb, u)));
  // The next block's rows: with one row the loop below prefetches each key's before reading it
  // (all the group's at once, 16 keys x 4 lines, the loads waited behind them: H 8, paged hnd
  // pages of 16, key by key 1.23x / 1.15x as fast, 1 / 2 threads).
  if (!tile.keyByKey)
    for (int64_t u = 0; u < tile.keys; ++u)
      prefetchNext(gb, Phase::Scores, gb.create<arith::AddIOp>(firstKey, indexConstant(gb, u)),
                   tile.pass, tile.passes);
  Value keyScales = keyScalesOf(gb, tile, keys);
  // With GQA the group's keys chunk by chunk, each K chunk widened once for the tile's rows. One
  // row of f16, bf16 or f32 keys reads them one by one in a loop, each key's partial sums
  // through `partials`: unrolled, the group's loads were scheduled chunk by chunk across its
  // keys (4 KiB apart at W = 16, d 128, f16), and the hardware's prefetchers fell behind (1
  // thread, H 8, Tk 16k: 1.3-1.5x as fast in a loop, d 64 to 256, f16 and bf16). With GQA the
  // loop was slower (q reloaded per key), and int8 rows 4% slower.
  SmallVector<Value> sums;
  if (!tile.keyByKey) {
    sums = keyDots(gb, tile, keys);
  } else {
    forRange(gb, indexConstant(gb, 0), indexConstant(gb, tile.keys),
             [&](ImplicitLocOpBuilder& ub, Value u) {
               prefetchNext(ub, Phase::Scores, ub.create<arith::AddIOp>(firstKey, u), tile.pass,
                            tile.passes);
               ub.create<vector::StoreOp>(keyDots(ub, tile, groupKey(ub, tile, firstKey, u)).front(),
                                          partials, ValueRange{u, indexConstant(ub, 0)});
             });
    for (int64_t u = 0; u < tile.keys; ++u)
      sums.push_back(gb.create<vector::LoadOp>(
          vector, partials, ValueRange{indexConstant(gb, u), indexConstant(gb, 0)}));
  }
  storeGroupScores(gb, tile, transposeReduce(gb, sums), keyScales, firstColumn);
}

Value DecodeLowering::keyScalesOf(ImplicitLocOpBuilder& gb, const ScoreTile& tile,
                                  KeyRows keys) {
  // A quantized cache's keys: s_u = k_scale[u] (q . k_q[u]), the scale (times the codes' factor,
  // loadRow's) applied to the sums.
  Value scale = op.getKeyScale();
  if (!scale)
    return Value();
  SmallVector<Value> perKey;
  for (auto [outer, row] : keys)
    perKey.push_back(gb.create<memref::LoadOp>(scale, ValueRange{outer, kvHead, row}));
  return scaleForUnscaled(
      gb, gb.create<vector::FromElementsOp>(VectorType::get({tile.keys}, gb.getF32Type()), perKey),
      tile.kv.getType());
}

SmallVector<Value> DecodeLowering::keyDots(ImplicitLocOpBuilder& db, const ScoreTile& tile,
                                           KeyRows over) {
  return blockProducts->keyDots(db, tile, over);
}

SmallVector<Value> DecodeLowering::widenedDotChunk(ImplicitLocOpBuilder& cb,
                                                   const ScoreTile& tile, Value c,
                                                   ValueRange running, bool whole, KeyRows over) {
  Value column = cb.create<arith::MulIOp>(c, indexConstant(cb, lanes));
  SmallVector<Value> q;
  for (Value row : tile.rowIndices)
    q.push_back(cb.create<vector::LoadOp>(vector, query, ValueRange{row, column}));
  SmallVector<Value> next(running.begin(), running.end());
  const int64_t n = static_cast<int64_t>(over.size());
  for (int64_t u = 0; u < n; ++u) {
    Value k = loadRow(cb, tile.kv, {over[u].first, kvHead, over[u].second, column}, lanes,
                      tile.contiguous, whole, dk);
    for (int64_t rr = 0; rr < tile.rows; ++rr)
      next[rr * n + u] = cb.create<vector::FMAOp>(q[rr], k, running[rr * n + u]);
  }
  return next;
}

SmallVector<Value> DecodeLowering::pairDotChunk(ImplicitLocOpBuilder& cb, const ScoreTile& tile,
                                                Value c, ValueRange running, KeyRows over) {
  auto chunkType = VectorType::get({2 * lanes}, cb.getBF16Type());
  Value column = cb.create<arith::MulIOp>(c, indexConstant(cb, 2 * lanes));
  SmallVector<Value> q;
  for (Value row : tile.rowIndices)
    q.push_back(cb.create<vector::LoadOp>(chunkType, queryPairs, ValueRange{row, column}));
  SmallVector<Value> next(running.begin(), running.end());
  const int64_t n = static_cast<int64_t>(over.size());
  for (int64_t u = 0; u < n; ++u) {
    Value k = cb.create<vector::LoadOp>(chunkType, tile.kv,
                                        ValueRange{over[u].first, kvHead, over[u].second, column});
    for (int64_t rr = 0; rr < tile.rows; ++rr)
      next[rr * n + u] = dotBf16Pairs(cb, running[rr * n + u], q[rr], k);
  }
  return next;
}

// Lanes [rr * keys, (rr + 1) * keys) of the reduced sums hold row rr's scores.
void DecodeLowering::storeGroupScores(ImplicitLocOpBuilder& gb, const ScoreTile& tile, Value s,
                                      Value keyScales, Value firstColumn) {
  for (int64_t rr = 0; rr < tile.rows; ++rr) {
    Value part = tile.rows == 1 ? s
                                : gb.create<vector::ExtractStridedSliceOp>(
                                      s, ArrayRef<int64_t>{rr * tile.keys},
                                      ArrayRef<int64_t>{tile.keys}, ArrayRef<int64_t>{1});
    if (keyScales)
      part = gb.create<arith::MulFOp>(part, keyScales);
    part = blockProducts->scaled(gb, part, tile.keys);
    gb.create<vector::StoreOp>(part, scores, ValueRange{tile.rowIndices[rr], firstColumn});
  }
}

void DecodeLowering::emitSoftmax(ImplicitLocOpBuilder& b, Value j0, Value count) {
  Value groups = b.create<arith::CeilDivUIOp>(count, indexConstant(b, lanes));
  Value off = ScoreTerms::positionOffset(b, taskOp);
  Value negInf = f32Splat(b, lanes, -kInf), zeros = f32Splat(b, lanes, 0);
  forRange(b, indexConstant(b, 0), rowCount, [&](ImplicitLocOpBuilder& rb, Value r) {
    auto [head, i] = rowAt(rb, r);
    ScoreTerms terms(rb, taskOp, batch, head);
    Value position = rb.create<vector::BroadcastOp>(
        vectorI32, i32(rb, rb.create<arith::AddIOp>(i, off)));
    Value lanesIota = iota(rb);
    // Key group g of the block: its first column in S, and the lanes' keys within the block
    // and in the sequence (i32).
    struct KeyLanes {
      Value first, inBlock, key;
    };
    auto keysOf = [&](ImplicitLocOpBuilder& kb, Value keyGroup) {
      Value first = kb.create<arith::MulIOp>(keyGroup, indexConstant(kb, lanes));
      Value inBlock = kb.create<arith::AddIOp>(
          kb.create<vector::BroadcastOp>(vectorI32, i32(kb, first)), lanesIota);
      Value key = kb.create<arith::AddIOp>(
          kb.create<vector::BroadcastOp>(vectorI32, i32(kb, j0)), inBlock);
      return KeyLanes{first, inBlock, key};
    };
    Value countI32 = rb.create<vector::BroadcastOp>(vectorI32, i32(rb, count));
    // body(kb, keys, s, running) over the block's key groups, s the group's scores of row r;
    // the value it returns is carried to the next group, and out of the last.
    auto overKeyGroups = [&](Value init, auto body) {
      auto loop = rb.create<scf::ForOp>(
          indexConstant(rb, 0), groups, indexConstant(rb, 1), ValueRange{init},
          [&](OpBuilder& nested, Location loc, Value keyGroup, ValueRange running) {
            ImplicitLocOpBuilder kb(loc, nested);
            const KeyLanes keys = keysOf(kb, keyGroup);
            Value s = kb.create<vector::LoadOp>(vector, scores, ValueRange{r, keys.first});
            kb.create<scf::YieldOp>(ValueRange{body(kb, keys, s, running[0])});
          });
      return loop.getResult(0);
    };
    // The terms, -inf past the block's keys, and the block's row max.
    Value maxima = overKeyGroups(negInf, [&](ImplicitLocOpBuilder& kb, const KeyLanes& keys,
                                             Value s, Value running) -> Value {
      s = terms.apply(kb, s, position, keys.key, ScoreTerms::MaskMod::Evaluate);
      Value inside = kb.create<arith::CmpIOp>(arith::CmpIPredicate::slt, keys.inBlock, countI32);
      s = kb.create<arith::SelectOp>(inside, s, negInf);
      kb.create<vector::StoreOp>(s, scores, ValueRange{r, keys.first});
      return kb.create<arith::MaximumFOp>(running, s);
    });
    Value blockMax = rb.create<vector::ReductionOp>(vector::CombiningKind::MAXIMUMF, maxima);
    Value oldMax = rb.create<memref::LoadOp>(rowMax, ValueRange{r});
    Value newMax = rb.create<arith::MaximumFOp>(oldMax, blockMax);
    Value safeMax = softmax.finiteMax(rb, newMax);
    Value rescale = softmax.rescaleFactor(rb, oldMax, safeMax);
    Value offset = rb.create<vector::BroadcastOp>(vector, softmax.probabilityOffset(rb, safeMax));
    // P = exp(S - m' - c), 0 where masked; dropout's factor weights P for PV only.
    Value sums = overKeyGroups(zeros, [&](ImplicitLocOpBuilder& kb, const KeyLanes& keys,
                                          Value s, Value running) -> Value {
      Value isMasked = kb.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, s, negInf);
      Value p = softmax.probability(kb, s, offset);
      p = kb.create<arith::SelectOp>(isMasked, zeros, p);
      Value sum = kb.create<arith::AddFOp>(running, p);
      p = terms.dropout(kb, p, position, keys.key);
      kb.create<vector::StoreOp>(p, scores, ValueRange{r, keys.first});
      blockProducts->storeProbabilities(kb, p, r, keys.first);
      return sum;
    });
    Value blockSum = rb.create<vector::ReductionOp>(vector::CombiningKind::ADD, sums);
    Value oldSum = rb.create<memref::LoadOp>(rowSum, ValueRange{r});
    rb.create<memref::StoreOp>(newMax, rowMax, ValueRange{r});
    rb.create<memref::StoreOp>(softmax.carriedSum(rb, rescale, oldSum, blockSum), rowSum,
                               ValueRange{r});
    rb.create<memref::StoreOp>(rescale, alpha, ValueRange{r});
  });
}

void DecodeLowering::emitValues(ImplicitLocOpBuilder& b, Value j0, Value count,
                                bool contiguous, int64_t pvRows) {
  // Register tiles of pvRows rows x `width` vectors of columns: the whole vectors of d_v in
  // groups of up to kPvAccumulators / pvRows (at most kPvVectors), then the vector d_v ends in.
  // Each tile is a pass over the block's keys: `pass` of `passes`, for prefetchNext.
  // Dot products take the vectors of d_v in pairs (a 32-column chunk of two keys' rows).
  ValueTiles tiles;
  tiles.kv = contiguous ? valueView : op.getValue();
  tiles.contiguous = contiguous;
  tiles.j0 = j0;
  tiles.count = count;
  tiles.rows = pvRows;
  const int64_t most = std::min(kPvVectors, kPvAccumulators / pvRows);
  const int64_t wholeVectors = dv / lanes;
  tiles.width = blockProducts->valueWidth(wholeVectors, most);
  tiles.columnTiles = wholeVectors / tiles.width + (dv % lanes != 0 ? 1 : 0);
  tiles.passes = llvm::divideCeil(group, pvRows) * tiles.columnTiles;
  // Whole register tiles of rows: a tile's rows past the task's compute on whatever their
  // scores hold and are never stored.
  b.create<scf::ForOp>(
      indexConstant(b, 0), rowCount, indexConstant(b, pvRows), std::nullopt,
      [&](OpBuilder& nested, Location loc, Value r0, ValueRange) {
        ImplicitLocOpBuilder rb(loc, nested);
        if (wholeVectors > 0)
          overChunks(rb, wholeVectors / tiles.width, {},
                     [&](ImplicitLocOpBuilder& gb, Value columnTile, ValueRange) {
                       Value firstVector =
                           gb.create<arith::MulIOp>(columnTile, indexConstant(gb, tiles.width));
                       const ValueTile at = tileAt(gb, tiles, r0, columnTile, firstVector,
                                                   tiles.width);
                       blockProducts->valueTile(gb, tiles, at);
                       return SmallVector<Value>{};
                     });
        if (dv % lanes != 0)
          emitValueTile(rb, tiles,
                        tileAt(rb, tiles, r0, indexConstant(rb, wholeVectors / tiles.width),
                               indexConstant(rb, wholeVectors), 1),
                        /*whole=*/false);
        rb.create<scf::YieldOp>();
      });
}

DecodeLowering::ValueTile DecodeLowering::tileAt(ImplicitLocOpBuilder& tb,
                                                 const ValueTiles& tiles, Value r0,
                                                 Value columnTile, Value firstVector,
                                                 int64_t width) {
  ValueTile at;
  at.pass = tb.create<arith::AddIOp>(
      tb.create<arith::MulIOp>(tb.create<arith::DivUIOp>(r0, indexConstant(tb, tiles.rows)),
                               indexConstant(tb, tiles.columnTiles)),
      columnTile);
  for (int64_t rr = 0; rr < tiles.rows; ++rr)
    at.rows.push_back(tb.create<arith::AddIOp>(r0, indexConstant(tb, rr)));
  for (int64_t c = 0; c < width; ++c)
    at.columns.push_back(tb.create<arith::MulIOp>(
        tb.create<arith::AddIOp>(firstVector, indexConstant(tb, c)), indexConstant(tb, lanes)));
  return at;
}

void DecodeLowering::emitValueTile(ImplicitLocOpBuilder& tb, const ValueTiles& tiles,
                                   const ValueTile& at, bool whole) {
  const int64_t pvRows = tiles.rows, width = static_cast<int64_t>(at.columns.size());
  SmallVector<Value> start;
  for (int64_t c = 0; c < width; ++c)
    for (int64_t rr = 0; rr < pvRows; ++rr) {
      Value a = tb.create<vector::LoadOp>(vector, acc, ValueRange{at.rows[rr], at.columns[c]});
      Value scale = tb.create<vector::BroadcastOp>(
          vector, tb.create<memref::LoadOp>(alpha, ValueRange{at.rows[rr]}));
      start.push_back(tb.create<arith::MulFOp>(a, scale));
    }
  auto loop = tb.create<scf::ForOp>(
      indexConstant(tb, 0), tiles.count, indexConstant(tb, 1), start,
      [&](OpBuilder& n2, Location l2, Value j, ValueRange running) {
        ImplicitLocOpBuilder jb(l2, n2);
        Value key = jb.create<arith::AddIOp>(tiles.j0, j);
        prefetchNext(jb, Phase::Values, key, at.pass, tiles.passes);
        auto [outer, row] = keyAt(jb, key);
        // A quantized cache's values: p v_j = (p v_scale[j]) v_q[j], the scale times the
        // codes' factor (loadRow's).
        Value valueScale;
        if (Value scale = op.getValueScale())
          valueScale = CacheRows::rowScale(jb, scale, tiles.kv, outer, kvHead, row);
        SmallVector<Value> p;
        for (int64_t rr = 0; rr < pvRows; ++rr) {
          Value weight = jb.create<memref::LoadOp>(scores, ValueRange{at.rows[rr], j});
          if (valueScale)
            weight = jb.create<arith::MulFOp>(weight, valueScale);
          p.push_back(jb.create<vector::BroadcastOp>(vector, weight));
        }
        SmallVector<Value> next(running.begin(), running.end());
        for (int64_t c = 0; c < width; ++c) {
          Value v = loadRow(jb, tiles.kv, {outer, kvHead, row, at.columns[c]}, lanes,
                            tiles.contiguous, whole, dv);
          for (int64_t rr = 0; rr < pvRows; ++rr)
            next[c * pvRows + rr] = jb.create<vector::FMAOp>(p[rr], v, running[c * pvRows + rr]);
        }
        jb.create<scf::YieldOp>(next);
      });
  for (int64_t c = 0; c < width; ++c)
    for (int64_t rr = 0; rr < pvRows; ++rr)
      tb.create<vector::StoreOp>(loop.getResult(c * pvRows + rr), acc,
                                 ValueRange{at.rows[rr], at.columns[c]});
}

// A 32-column chunk's pairs (lo, hi) as vpunpck{l,h}wd leave them, and the way back: each
// 128-bit lane of 8 bf16 columns gives its first 4 to lo's lane, its last 4 to hi's.
DecodeLowering::PairOrder DecodeLowering::pairOrder() const {
  constexpr int64_t kLaneColumns = 8, kLanePairs = 4;
  PairOrder order;
  for (int64_t lane = 0; lane < 2 * lanes / kLaneColumns; ++lane)
    for (int64_t i = 0; i < kLanePairs; ++i) {
      const int64_t low = kLaneColumns * lane + i, high = low + kLanePairs;
      order.toLow.push_back(low);
      order.toHigh.push_back(high);
      order.interleaveLow.append({low, 2 * lanes + low});
      order.interleaveHigh.append({high, 2 * lanes + high});
    }
  for (int64_t c = 0; c < 2 * lanes; ++c) {
    const int64_t lane = c / kLaneColumns, i = c % kLaneColumns;
    order.back[c / lanes].push_back(i < kLanePairs ? kLanePairs * lane + i
                                                   : lanes + kLanePairs * lane + i - kLanePairs);
  }
  return order;
}

// The dot products' tile: keys two at a time, an odd last one alone (its partner's V taken as
// 0, so that a row past the block never meets its P = 0).
void DecodeLowering::emitPairValueTile(ImplicitLocOpBuilder& tb, const ValueTiles& tiles,
                                       const ValueTile& at) {
  const int64_t pvRows = tiles.rows, width = tiles.width;
  const PairOrder order = pairOrder();
  // start[c * pvRows + rr]: vector c of the tile in pair order (low, high of each chunk).
  SmallVector<Value> start(width * pvRows);
  for (int64_t c = 0; c < width; c += 2)
    for (int64_t rr = 0; rr < pvRows; ++rr) {
      Value scale = tb.create<vector::BroadcastOp>(
          vector, tb.create<memref::LoadOp>(alpha, ValueRange{at.rows[rr]}));
      Value natural[2];
      for (int64_t h = 0; h < 2; ++h)
        natural[h] = tb.create<arith::MulFOp>(
            tb.create<vector::LoadOp>(vector, acc, ValueRange{at.rows[rr], at.columns[c + h]}),
            scale);
      start[c * pvRows + rr] = tb.create<vector::ShuffleOp>(natural[0], natural[1], order.toLow);
      start[(c + 1) * pvRows + rr] =
          tb.create<vector::ShuffleOp>(natural[0], natural[1], order.toHigh);
    }
  Value two = indexConstant(tb, 2);
  auto loop = tb.create<scf::ForOp>(
      indexConstant(tb, 0), tb.create<arith::DivUIOp>(tiles.count, two), indexConstant(tb, 1),
      start, [&](OpBuilder& n2, Location l2, Value jp, ValueRange running) {
        ImplicitLocOpBuilder jb(l2, n2);
        jb.create<scf::YieldOp>(pairValueStep(jb, tiles, at, order,
                                              jb.create<arith::MulIOp>(jp, two), running, false));
      });
  ValueRange result = loop.getResults();
  Value odd = tb.create<arith::CmpIOp>(arith::CmpIPredicate::ne,
                                       tb.create<arith::RemUIOp>(tiles.count, two),
                                       indexConstant(tb, 0));
  auto last = tb.create<scf::IfOp>(
      odd,
      [&](OpBuilder& n2, Location l2) {
        ImplicitLocOpBuilder jb(l2, n2);
        Value j = jb.create<arith::SubIOp>(tiles.count, indexConstant(jb, 1));
        jb.create<scf::YieldOp>(pairValueStep(jb, tiles, at, order, j, result, true));
      },
      [&](OpBuilder& n2, Location l2) { n2.create<scf::YieldOp>(l2, result); });
  for (int64_t c = 0; c < width; c += 2)
    for (int64_t rr = 0; rr < pvRows; ++rr) {
      Value low = last.getResult(c * pvRows + rr), high = last.getResult((c + 1) * pvRows + rr);
      for (int64_t h = 0; h < 2; ++h)
        tb.create<vector::StoreOp>(tb.create<vector::ShuffleOp>(low, high, order.back[h]), acc,
                                   ValueRange{at.rows[rr], at.columns[c + h]});
    }
}

SmallVector<Value> DecodeLowering::pairValueStep(ImplicitLocOpBuilder& jb,
                                                 const ValueTiles& tiles, const ValueTile& at,
                                                 const PairOrder& order, Value j,
                                                 ValueRange running, bool alone) {
  const int64_t pvRows = tiles.rows;
  auto chunkType = VectorType::get({2 * lanes}, jb.getBF16Type());
  Value key = jb.create<arith::AddIOp>(tiles.j0, j);
  auto [outer, row] = keyAt(jb, key);
  std::pair<Value, Value> next{};
  if (!alone)
    next = keyAt(jb, jb.create<arith::AddIOp>(key, indexConstant(jb, 1)));
  for (int64_t e = 0; e < (alone ? 1 : 2); ++e)
    prefetchNext(jb, Phase::Values, jb.create<arith::AddIOp>(key, indexConstant(jb, e)), at.pass,
                 tiles.passes);
  SmallVector<Value> p;
  for (int64_t rr = 0; rr < pvRows; ++rr)
    p.push_back(broadcastBf16Pair(
        jb, loadBf16Pair(jb, probabilityPairs, ValueRange{at.rows[rr], j}), lanes));
  Value zeros = jb.create<arith::ConstantOp>(
      DenseElementsAttr::get(chunkType, jb.getFloatAttr(jb.getBF16Type(), 0)));
  SmallVector<Value> out(running.begin(), running.end());
  for (int64_t c = 0; c < tiles.width; c += 2) {
    Value first = jb.create<vector::LoadOp>(chunkType, tiles.kv,
                                            ValueRange{outer, kvHead, row, at.columns[c]});
    Value second = alone ? zeros
                         : jb.create<vector::LoadOp>(
                               chunkType, tiles.kv,
                               ValueRange{next.first, kvHead, next.second, at.columns[c]});
    Value low = jb.create<vector::ShuffleOp>(first, second, order.interleaveLow);
    Value high = jb.create<vector::ShuffleOp>(first, second, order.interleaveHigh);
    for (int64_t rr = 0; rr < pvRows; ++rr) {
      out[c * pvRows + rr] = dotBf16Pairs(jb, running[c * pvRows + rr], low, p[rr]);
      out[(c + 1) * pvRows + rr] = dotBf16Pairs(jb, running[(c + 1) * pvRows + rr], high, p[rr]);
    }
  }
  return out;
}

void DecodeLowering::emitBlock(ImplicitLocOpBuilder& b, Value j0, Value count, bool contiguous,
                               RowTiles tiles) {
  emitScores(b, j0, count, contiguous, tiles.score);
  emitSoftmax(b, j0, count);
  emitValues(b, j0, count, contiguous, tiles.values);
}

void DecodeLowering::emitPartial(ImplicitLocOpBuilder& b, Value task) {
  placeTask(b, task);
  allocateTaskStack(b);
  Value useWide = wideTilesWanted(b);
  emitTaskInit(b, useWide);
  emitKeyBlocks(b, useWide);
  storePartialState(b);
  rewriter.eraseOp(taskOp);
}

void DecodeLowering::placeTask(ImplicitLocOpBuilder& b, Value task) {
  split = b.create<arith::RemUIOp>(task, splits);
  Value rest = b.create<arith::DivUIOp>(task, splits);
  Value queryTile = b.create<arith::RemUIOp>(rest, queryTiles);
  rest = b.create<arith::DivUIOp>(rest, queryTiles);
  kvHead = b.create<arith::RemUIOp>(rest, indexConstant(b, kvHeads));
  batch = b.create<arith::DivUIOp>(rest, indexConstant(b, kvHeads));
  firstRow = b.create<arith::MulIOp>(queryTile, indexConstant(b, rowsPerHead));
  headRows = b.create<arith::MinUIOp>(indexConstant(b, rowsPerHead),
                                      b.create<arith::SubIOp>(seqQ, firstRow));
  rowCount = b.create<arith::MulIOp>(headRows, indexConstant(b, group));
  cache.emplace(b, op.getKey(), op.getBlockTable());

  // The update over the task's domain: its heads, rows and every key, for the key range and
  // the terms; erased once the task is emitted.
  taskOp = cast<OnlineUpdateOp>(rewriter.clone(*op));
  rewriter.moveOpBefore(taskOp, b.getInsertionBlock(), b.getInsertionPoint());
  Value firstHead = b.create<arith::MulIOp>(kvHead, indexConstant(b, group));
  rewriter.modifyOpInPlace(taskOp, [&] {
    taskOp.getOffsetsMutable().assign({batch, firstHead, firstRow, indexConstant(b, 0)});
    taskOp.getSizesMutable().assign(
        {indexConstant(b, 1), indexConstant(b, group), headRows, seqK});
  });
}

void DecodeLowering::allocateTaskStack(ImplicitLocOpBuilder& b) {
  // The task's stack: the rows' scaled queries, scores, state and the block's rescale factors.
  auto f32 = b.getF32Type();
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(taskStackBlock(taskOp));
    query = b.create<memref::AllocaOp>(MemRefType::get({taskRows, dkPadded}, f32));
    scores = b.create<memref::AllocaOp>(MemRefType::get({taskRows, roundUp(keyBlock, lanes)}, f32));
    acc = b.create<memref::AllocaOp>(MemRefType::get({taskRows, dvPadded}, f32));
    rowMax = b.create<memref::AllocaOp>(MemRefType::get({taskRows}, f32));
    rowSum = b.create<memref::AllocaOp>(MemRefType::get({taskRows}, f32));
    alpha = b.create<memref::AllocaOp>(MemRefType::get({taskRows}, f32));
    if (groupTiles.score == 1 && !op.getKeyScale())
      partials = b.create<memref::AllocaOp>(MemRefType::get({lanes, lanes}, f32));
    if (pairs) {
      queryPairs =
          b.create<memref::AllocaOp>(MemRefType::get({taskRows, dkPadded}, b.getBF16Type()));
      probabilityPairs = b.create<memref::AllocaOp>(
          MemRefType::get({taskRows, roundUp(keyBlock, lanes)}, b.getBF16Type()));
    }
  }
}

Value DecodeLowering::wideTilesWanted(ImplicitLocOpBuilder& b) {
  // Wide tiles once they are half full and hold more rows than the group's (H 8, d 128, f16,
  // Tk 16k, 1 thread: 4 rows 1.12x as fast as four passes of one row, 3 rows 1.08x slower than
  // three passes), chosen once per task: chosen per key block, a GQA 32/8 step of one row was
  // 3-4% slower.
  Value useWide;
  if (wideTiles)
    useWide = b.create<arith::CmpIOp>(
        arith::CmpIPredicate::uge, rowCount,
        indexConstant(b, std::max(wideTiles->score / 2, groupTiles.score + 1)));
  return useWide;
}

void DecodeLowering::emitTaskInit(ImplicitLocOpBuilder& b, Value useWide) {
  // The rows the tiles read: the task's, rounded up to whole tiles.
  Value tileRows = indexConstant(b, groupTiles.most());
  if (useWide)
    tileRows = b.create<arith::SelectOp>(useWide, indexConstant(b, wideTiles->most()), tileRows);
  Value usedRows = b.create<arith::MulIOp>(b.create<arith::CeilDivUIOp>(rowCount, tileRows),
                                           tileRows);
  forRange(b, indexConstant(b, 0), usedRows, [&](ImplicitLocOpBuilder& rb, Value r) {
    packQueryRow(rb, r);
    rb.create<memref::StoreOp>(f32Constant(rb, -kInf), rowMax, ValueRange{r});
    rb.create<memref::StoreOp>(f32Constant(rb, 0), rowSum, ValueRange{r});
    rb.create<memref::StoreOp>(f32Constant(rb, 0), alpha, ValueRange{r});
  });
}

// Row r's query scaled into the task's stack, zero past d_k (and unscaled in bf16 for dot
// products), and its accumulator zeroed.
void DecodeLowering::packQueryRow(ImplicitLocOpBuilder& b, Value r) {
  const float scale = static_cast<float>(op.getScale().convertToDouble());
  auto [head, i] = rowAt(b, r);
  forRange(
      b, indexConstant(b, 0), indexConstant(b, dkPadded), [&](ImplicitLocOpBuilder& cb, Value c) {
        Value inside =
            cb.create<arith::CmpIOp>(arith::CmpIPredicate::ult, c, indexConstant(cb, dk));
        Value element =
            loadF32(cb, op.getQuery(),
                    {batch, head, i, cb.create<arith::MinUIOp>(c, indexConstant(cb, dk - 1))});
        Value value = cb.create<arith::SelectOp>(
            inside, cb.create<arith::MulFOp>(element, f32Constant(cb, scale)), f32Constant(cb, 0));
        cb.create<memref::StoreOp>(value, query, ValueRange{r, c});
        // Unscaled for dot products (exact in bf16 where q times the scale
        // is not); emitScores scales their sums in f32.
        if (pairs)
          cb.create<memref::StoreOp>(
              cb.create<arith::TruncFOp>(
                  cb.getBF16Type(),
                  cb.create<arith::SelectOp>(inside, element, f32Constant(cb, 0))),
              queryPairs, ValueRange{r, c});
      });
  forRange(b, indexConstant(b, 0), indexConstant(b, dvPadded / lanes),
           [&](ImplicitLocOpBuilder& cb, Value c) {
             cb.create<vector::StoreOp>(
                 f32Splat(cb, lanes, 0), acc,
                 ValueRange{r, cb.create<arith::MulIOp>(c, indexConstant(cb, lanes))});
           });
}

void DecodeLowering::emitKeyBlocks(ImplicitLocOpBuilder& b, Value useWide) {
  // This split's whole key blocks of the range the mask can keep for the task's rows.
  auto [lo, hi] = keptKeyRange(b, taskOp);
  Value block = indexConstant(b, keyBlock);
  Value span = b.create<arith::SubIOp>(hi, lo);
  Value per = b.create<arith::MulIOp>(
      b.create<arith::CeilDivUIOp>(b.create<arith::CeilDivUIOp>(span, block), splits), block);
  Value first = b.create<arith::MinUIOp>(
      b.create<arith::AddIOp>(lo, b.create<arith::MulIOp>(split, per)), hi);
  Value last = b.create<arith::MinUIOp>(b.create<arith::AddIOp>(first, per), hi);
  // The key blocks with the given tiles.
  WidenedDecodeProducts widened(*this);
  DotDecodeProducts dot(*this);
  auto emitBlocks = [&](RowTiles tiles, bool contiguous) {
    // Dot products where bf16 K and V allow them and their inner strides are 1.
    blockProducts = pairs && contiguous ? static_cast<DecodeProducts*>(&dot) : &widened;
    auto blocks = b.create<scf::ForOp>(first, last, block);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(blocks.getBody()->getTerminator());
    Value j0 = blocks.getInductionVar();
    Value count = b.create<arith::MinUIOp>(block, b.create<arith::SubIOp>(last, j0));
    emitBlock(b, j0, count, contiguous, tiles);
  };
  {
    OpBuilder::InsertionGuard guard(b);
    auto layout = b.create<scf::IfOp>(contiguousKv, /*withElseRegion=*/true);
    b.setInsertionPoint(layout.thenBlock()->getTerminator());
    if (useWide) {
      auto wide = b.create<scf::IfOp>(useWide, /*withElseRegion=*/true);
      b.setInsertionPoint(wide.thenBlock()->getTerminator());
      emitBlocks(*wideTiles, /*contiguous=*/true);
      b.setInsertionPoint(wide.elseBlock()->getTerminator());
    }
    emitBlocks(groupTiles, /*contiguous=*/true);
    // K and V of strided head dims, read element by element, take the group's tiles only.
    b.setInsertionPoint(layout.elseBlock()->getTerminator());
    emitBlocks(groupTiles, /*contiguous=*/false);
  }
}

void DecodeLowering::storePartialState(ImplicitLocOpBuilder& b) {
  // The split's unnormalised state of the task's rows into the workspace.
  forRange(b, indexConstant(b, 0), rowCount, [&](ImplicitLocOpBuilder& rb, Value r) {
    auto [head, i] = rowAt(rb, r);
    Value row = workspaceRow(rb, batch, head, i);
    rb.create<memref::StoreOp>(rb.create<memref::LoadOp>(rowMax, ValueRange{r}), workMax,
                               ValueRange{split, row});
    rb.create<memref::StoreOp>(rb.create<memref::LoadOp>(rowSum, ValueRange{r}), workSum,
                               ValueRange{split, row});
    forRange(rb, indexConstant(rb, 0), indexConstant(rb, dvPadded / lanes),
             [&](ImplicitLocOpBuilder& cb, Value c) {
               Value column = cb.create<arith::MulIOp>(c, indexConstant(cb, lanes));
               cb.create<vector::StoreOp>(
                   cb.create<vector::LoadOp>(vector, acc, ValueRange{r, column}), workAcc,
                   ValueRange{split, row, column});
             });
  });
}

void DecodeLowering::emitMerge(ImplicitLocOpBuilder& b, Value task) {
  Value batchIndex = b.create<arith::DivUIOp>(task, indexConstant(b, heads));
  Value head = b.create<arith::RemUIOp>(task, indexConstant(b, heads));
  Value output = finalize.getOutput(), lse = finalize.getLse();
  Value zero = indexConstant(b, 0);
  forRange(b, zero, seqQ, [&](ImplicitLocOpBuilder& ib, Value i) {
    Value row = workspaceRow(ib, batchIndex, head, i);
    Value sink = finalize.getSinks()
                     ? ib.create<memref::LoadOp>(finalize.getSinks(), ValueRange{head}).getResult()
                     : Value();
    auto maxOf = [&](ImplicitLocOpBuilder& sb, Value s) -> Value {
      return sb.create<memref::LoadOp>(workMax, ValueRange{s, row});
    };
    auto sumOf = [&](ImplicitLocOpBuilder& sb, Value s) -> Value {
      return sb.create<memref::LoadOp>(workSum, ValueRange{s, row});
    };
    MergedSplits merged = softmax.mergeSplits(ib, splits, maxOf, sumOf, sink);
    // o = sum_s w_s A_s / L, a vector of columns at a time, stored element by element (o has
    // any strides) up to d_v.
    forRange(ib, zero, indexConstant(ib, dvPadded / lanes), [&](ImplicitLocOpBuilder& cb, Value c) {
      Value column = cb.create<arith::MulIOp>(c, indexConstant(cb, lanes));
      Value o = foldRange(
          cb, zero, splits, {f32Splat(cb, lanes, 0)},
          [&](ImplicitLocOpBuilder& sb, Value s, ValueRange run) {
            Value w = sb.create<vector::BroadcastOp>(vector,
                                                     softmax.splitWeight(sb, merged, maxOf(sb, s)));
            Value a = sb.create<vector::LoadOp>(vector, workAcc, ValueRange{s, row, column});
            return SmallVector<Value>{sb.create<vector::FMAOp>(w, a, run[0])};
          })[0];
      o = cb.create<arith::MulFOp>(o, cb.create<vector::BroadcastOp>(vector, merged.inverse));
      Value lanesHere = cb.create<arith::MinUIOp>(
          indexConstant(cb, lanes), cb.create<arith::SubIOp>(indexConstant(cb, dv), column));
      forRange(cb, zero, lanesHere, [&](ImplicitLocOpBuilder& lb, Value lane) {
        storeF32(lb, lb.create<vector::ExtractOp>(o, OpFoldResult(lane)), output,
                 {batchIndex, head, i, lb.create<arith::AddIOp>(column, lane)});
      });
    });
    if (lse)
      ib.create<memref::StoreOp>(softmax.finishedLse(ib, merged.max, merged.sum), lse,
                                 ValueRange{batchIndex, head, i});
  });
}

LogicalResult DecodeLowering::emit() {
  if (failed(check()))
    return failure();
  FailureOr<StateOps> state = findStateOps(op, "lower_decode");
  if (failed(state))
    return failure();

  finalize = state->finalize;

  // The workspace and its sizes where the state was allocated: before every phase, RoPE's
  // included (attn-outline-tasks).
  rewriter.setInsertionPoint(state->allocs.front());
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  Value batches = emitWorkspace(b);
  // K and V with their innermost stride stated as 1, read by vector loads when it is.
  contiguousKv = b.create<arith::AndIOp>(unitInnermost(b, op.getKey(), keyView),
                                         unitInnermost(b, op.getValue(), valueView));

  // The phases where the update was.
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder at(op.getLoc(), rewriter);
  emitPhases(at, batches);
  eraseWithStateOps(rewriter, op, *state);
  return success();
}

LogicalResult DecodeLowering::check() {
  if (lanes <= 1 || (lanes & (lanes - 1)) != 0)
    return op.emitOpError() << "lower_decode: vector_width must be a power of two above 1";
  if (keyBlock <= 0 || rowsPerHead <= 0 || splitKeys <= 0)
    return op.emitOpError() << "lower_decode: key_block, rows and split_keys must be positive";
  if (op.hasPackedQuery() || ShapedType::isDynamic(kvHeads) || heads % kvHeads != 0)
    return op.emitOpError() << "lower_decode needs the whole query and static KV heads";
  for (Value offset : op.getOffsets())
    if (getConstantIntValue(offset) != 0)
      return op.emitOpError() << "lower_decode needs the whole attention (before tiling)";
  return success();
}

Value DecodeLowering::emitWorkspace(ImplicitLocOpBuilder& b) {
  ValueRange sizes = op.getSizes();
  Value batches = sizes[0];
  seqQ = sizes[2];
  seqK = sizes[3];
  Value one = indexConstant(b, 1);
  queryTiles = b.create<arith::CeilDivUIOp>(seqQ, indexConstant(b, rowsPerHead));
  // splits = ceil(Tk / split_keys), raised to make kMinTasks tasks when the batch and heads are
  // few, within [1, min(kMaxSplits, key blocks of Tk)].
  Value tasksUnsplit = b.create<arith::MulIOp>(
      b.create<arith::MulIOp>(batches, indexConstant(b, kvHeads)), queryTiles);
  Value wanted = b.create<arith::MaxUIOp>(
      b.create<arith::CeilDivUIOp>(seqK, indexConstant(b, splitKeys)),
      b.create<arith::CeilDivUIOp>(indexConstant(b, kMinTasks),
                                   b.create<arith::MaxUIOp>(tasksUnsplit, one)));
  Value most = b.create<arith::MinUIOp>(
      indexConstant(b, kMaxSplits),
      b.create<arith::CeilDivUIOp>(seqK, indexConstant(b, keyBlock)));
  splits = b.create<arith::MaxUIOp>(one, b.create<arith::MinUIOp>(wanted, most));
  Value workRows = b.create<arith::MulIOp>(
      b.create<arith::MulIOp>(batches, indexConstant(b, heads)), seqQ);
  auto f32 = b.getF32Type();
  const int64_t dyn = ShapedType::kDynamic;
  workAcc = b.create<memref::AllocOp>(MemRefType::get({dyn, dyn, dvPadded}, f32),
                                      ValueRange{splits, workRows});
  workMax = b.create<memref::AllocOp>(MemRefType::get({dyn, dyn}, f32), ValueRange{splits, workRows});
  workSum = b.create<memref::AllocOp>(MemRefType::get({dyn, dyn}, f32), ValueRange{splits, workRows});
  return batches;
}

Value DecodeLowering::unitInnermost(ImplicitLocOpBuilder& b, Value buffer, Value& view) {
  const int64_t dyn = ShapedType::kDynamic;
  auto type = cast<MemRefType>(buffer.getType());
  auto metadata = b.create<memref::ExtractStridedMetadataOp>(buffer);
  SmallVector<int64_t> staticStrides(4, dyn);
  staticStrides[3] = 1;
  auto layout = StridedLayoutAttr::get(b.getContext(), dyn, staticStrides);
  auto viewType = MemRefType::get(type.getShape(), type.getElementType(), layout);
  SmallVector<OpFoldResult> viewSizes, viewStrides;
  for (int d = 0; d < 4; ++d) {
    viewSizes.push_back(metadata.getSizes()[d]);
    viewStrides.push_back(d == 3 ? OpFoldResult(b.getIndexAttr(1))
                                 : OpFoldResult(metadata.getStrides()[d]));
  }
  view = b.create<memref::ReinterpretCastOp>(viewType, metadata.getBaseBuffer(),
                                             OpFoldResult(metadata.getOffset()), viewSizes,
                                             viewStrides);
  return b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, metadata.getStrides()[3],
                                 indexConstant(b, 1));
}

void DecodeLowering::emitPhases(ImplicitLocOpBuilder& at, Value batches) {
  Value tasks = at.create<arith::MulIOp>(
      at.create<arith::MulIOp>(at.create<arith::MulIOp>(batches, indexConstant(at, kvHeads)),
                               queryTiles),
      splits);
  auto partial =
      at.create<scf::ForallOp>(ArrayRef<OpFoldResult>{tasks}, ValueRange{}, std::nullopt);
  {
    OpBuilder::InsertionGuard guard(at);
    at.setInsertionPoint(partial.getBody()->getTerminator());
    emitPartial(at, partial.getInductionVar(0));
  }
  Value rowsOfHeads = at.create<arith::MulIOp>(batches, indexConstant(at, heads));
  auto merge =
      at.create<scf::ForallOp>(ArrayRef<OpFoldResult>{rowsOfHeads}, ValueRange{}, std::nullopt);
  {
    OpBuilder::InsertionGuard guard(at);
    at.setInsertionPoint(merge.getBody()->getTerminator());
    emitMerge(at, merge.getInductionVar(0));
  }
  for (Value buffer : {workAcc, workMax, workSum})
    at.create<memref::DeallocOp>(buffer);
}

} // namespace

LogicalResult lowerDecode(RewriterBase& rewriter, OnlineUpdateOp update,
                          const DecodeOptions& options) {
  return DecodeLowering(rewriter, update, options).emit();
}

} // namespace attnc::attn
