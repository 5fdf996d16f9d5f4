//===- DecodeLowering.h - the CPU decode kernel, from one update --------------===//
//
// DecodeLowering replaces a whole attention's online_update by the decode kernel
// (LowerDecode.cpp: the tasks, their state and the merge; DecodeScores.cpp: QK^T and the
// softmax of a key block; DecodeValues.cpp: PV), with the ways of multiplying here
// (DecodeProducts). Private to those files.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMS_DECODELOWERING_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMS_DECODELOWERING_H

#include "attn/IR/AttnOps.h"
#include "attn/Kit/Builders.h"
#include "attn/Kit/CacheRows.h"
#include "attn/Kit/OnlineState.h"
#include "attn/Kit/Products.h"
#include "attn/Transforms/Transforms.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <limits>
#include <numeric>
#include <optional>

namespace attnc::attn::decode {

// The three files of the kernel write MLIR's names unqualified, as every lowering does.
using namespace mlir;

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

// The largest divisor of n up to `most` (at least 1).
inline int64_t divisorUpTo(int64_t n, int64_t most) {
  for (int64_t d = std::min(n, most); d > 1; --d)
    if (n % d == 0)
      return d;
  return 1;
}

// `lanes` consecutive elements of the innermost dim of `buffer` from `indices` as f32
// (toF32Unscaled: an int8 cache's as signed integers, an fp8 one's decoded to 2^-8 its value,
// the 256 folded into the rows' scales by the callers): one vector load when the chunk is
// `whole` (inside the row) and the buffer `contiguous` (unit innermost stride), else element by
// element with the column clamped into the row of `rowLength`.
Value loadRow(ImplicitLocOpBuilder& b, Value buffer, ValueRange indices, int64_t lanes,
              bool contiguous, bool whole, int64_t rowLength);

// body(i, carried) for i in [0, count), each returning the next carried values: unrolled up to
// kUnrolledChunks iterations (the head dims of real models), an scf.for past them (so a head dim
// of 32768 compiles in seconds).
SmallVector<Value> overChunks(
    ImplicitLocOpBuilder& b, int64_t count, ValueRange init,
    function_ref<SmallVector<Value>(ImplicitLocOpBuilder&, Value, ValueRange)> body);

// The rows of the register tiles of QK^T (score) and PV (values).
struct RowTiles {
  int64_t score, values;
  int64_t most() const { return std::max(score, values); }
};

class DecodeProducts;

class DecodeLowering {
public:
  DecodeLowering(RewriterBase& rewriter, OnlineUpdateOp op, const DecodeOptions& options);

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
  const int64_t lanes, keyBlock, rowsPerHead, splitKeys, heads, kvHeads, group, dk, dv, dkPadded,
      dvPadded, keyBlockPadded; // ...Padded: rounded up to whole vectors
  const bool rowsApart; // positionsBeforeHeads
  // bf16 K and V whose products can go as dot products (vdpbf16ps): d_k and d_v in whole
  // chunks of 2W, no scales; taken where the run-time check finds unit inner strides.
  const bool pairs;
  // Register tiles sized by the GQA group G, not by Tq (a step of one row is the common case),
  // and, for tasks of more rows than those hold and at least kMaxScoreRows / 2 (several query
  // rows per head: speculative decoding, short chunks), tiles of kMaxScoreRows rows, each K and
  // V chunk widened once for them (wideTilesWanted picks per task; H 8, d 128, f16, Tk 16k: Tq 8
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

} // namespace attnc::attn::decode

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_DECODELOWERING_H
