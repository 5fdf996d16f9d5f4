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
#include "attn/Transforms/DecodeLowering.h"
#include "attn/Transforms/KeyRange.h"
#include "attn/Transforms/Transforms.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <bit>

using namespace mlir;

namespace attnc::attn {
namespace decode {

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

namespace {

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

} // namespace

DecodeLowering::DecodeLowering(RewriterBase& rewriter, OnlineUpdateOp op,
                               const DecodeOptions& options)
    : rewriter(rewriter), op(op), lanes(options.vectorWidth), keyBlock(options.keyBlock),
      rowsPerHead(options.rows), splitKeys(options.splitKeys),
      heads(static_cast<int64_t>(op.getNumHeads())), kvHeads(op.getKey().getType().getDimSize(1)),
      group(heads / kvHeads), dk(op.getKey().getType().getDimSize(3)),
      dv(op.getValue().getType().getDimSize(3)),
      dkPadded(static_cast<int64_t>(llvm::alignTo(dk, lanes))),
      dvPadded(static_cast<int64_t>(llvm::alignTo(dv, lanes))),
      keyBlockPadded(static_cast<int64_t>(llvm::alignTo(keyBlock, lanes))),
      rowsApart(positionsBeforeHeads(op)),
      pairs(options.dot && lanes == 16 && !op.getKeyScale() && !op.getValueScale() &&
            op.getKey().getType().getElementType().isBF16() &&
            op.getValue().getType().getElementType().isBF16() && dk % (2 * lanes) == 0 &&
            dv % (2 * lanes) == 0),
      groupTiles(groupRowTiles(group, lanes, rowsApart)),
      wideTiles(wideRowTiles(groupTiles, lanes, group * rowsPerHead, rowsApart)),
      taskRows(static_cast<int64_t>(
          llvm::alignTo(group * rowsPerHead, (wideTiles ? *wideTiles : groupTiles).most()))),
      keysAhead(rowsApart ? std::max<int64_t>(1, keyBlock / kvHeads) : keyBlock),
      vector(VectorType::get({lanes}, rewriter.getF32Type())),
      vectorI32(VectorType::get({lanes}, rewriter.getI32Type())) {}

std::pair<Value, Value> DecodeLowering::keyAt(ImplicitLocOpBuilder& b, Value key) {
  return cache->place(b, batch, key);
}

DecodeLowering::Lines DecodeLowering::phaseLines(Value buffer, Phase phase) {
  const bool isKey = buffer == op.getKey();
  const int64_t lines = llvm::divideCeil(isKey ? dk : dv, elementsPerCacheLine(buffer));
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
    const int64_t perLine = elementsPerCacheLine(stream.buffer);
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
    scores = b.create<memref::AllocaOp>(MemRefType::get({taskRows, keyBlockPadded}, f32));
    acc = b.create<memref::AllocaOp>(MemRefType::get({taskRows, dvPadded}, f32));
    rowMax = b.create<memref::AllocaOp>(MemRefType::get({taskRows}, f32));
    rowSum = b.create<memref::AllocaOp>(MemRefType::get({taskRows}, f32));
    alpha = b.create<memref::AllocaOp>(MemRefType::get({taskRows}, f32));
    if (groupTiles.score == 1 && !op.getKeyScale())
      partials = b.create<memref::AllocaOp>(MemRefType::get({lanes, lanes}, f32));
    if (pairs) {
      queryPairs =
          b.create<memref::AllocaOp>(MemRefType::get({taskRows, dkPadded}, b.getBF16Type()));
      probabilityPairs =
          b.create<memref::AllocaOp>(MemRefType::get({taskRows, keyBlockPadded}, b.getBF16Type()));
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
        // is not); DotDecodeProducts::scaled scales their sums in f32.
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
  if (op.getScoreWeights())
    return op.emitOpError() << "lower_decode takes q . k scores, not an additive score";
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

} // namespace decode

LogicalResult lowerDecode(RewriterBase& rewriter, OnlineUpdateOp update,
                          const DecodeOptions& options) {
  return decode::DecodeLowering(rewriter, update, options).emit();
}

} // namespace attnc::attn
