//===- MmaSplitKey.cpp - the split-key tensor-core kernels and their merge ----===//
//
// Decoding (few tasks, many keys) splits each task's keys over several blocks when the
// options allow: the launch has blocks (tasks, splits), each writes its unnormalised
// (acc, m, l) to a workspace, and a second launch merges them per row:
//   M = max_s m_s, L = sum_s exp(m_s - M) l_s, O = sum_s exp(m_s - M) acc_s / L.
// The split count is chosen at run time, ceil(fill_blocks / tasks) capped by max_key_splits
// and the number of key blocks; with one split the single-pass kernel runs.
//
// The split kernel is the one-pass kernel (MmaOnePass.cpp) on its share of the key blocks,
// storing its state instead of finalizing.
//
//===---------------------------------------------------------------------------===//
#include "attn/Kit/CacheRows.h"
#include "attn/Kit/Elements.h"
#include "attn/Kit/OnlineState.h"
#include "attn/Transforms/MmaLowering.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc::attn {

// splits = clamp(ceil(fill_blocks / tasks), 1, min(max_key_splits, key blocks of Tk)); one
// split runs the single-pass kernel, more run the split kernel and the merge on a workspace
// allocated on the caller's stream.
void MmaLowering::emitSplitOrWhole(ImplicitLocOpBuilder& b, Value count) {
  Value one = c(b, 1);
  Value keyBlocks =
      b.create<arith::CeilDivUIOp>(CacheRows::keys(b, key, update.getBlockTable()), c(b, block));
  Value wanted =
      b.create<arith::CeilDivUIOp>(c(b, options.fillBlocks), b.create<arith::MaxUIOp>(count, one));
  Value splits = b.create<arith::MaxUIOp>(
      one, b.create<arith::MinUIOp>(
               wanted, b.create<arith::MinUIOp>(c(b, options.maxKeySplits), keyBlocks)));
  auto ifSplit = b.create<scf::IfOp>(
      b.create<arith::CmpIOp>(arith::CmpIPredicate::ugt, splits, one), /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(ifSplit.elseBlock()->getTerminator());
  emitLaunch(b, Phase::Whole, count, one);

  b.setInsertionPoint(ifSplit.thenBlock()->getTerminator());
  auto tokenType = gpu::AsyncTokenType::get(b.getContext());
  Value token = b.create<gpu::WaitOp>(tokenType, ValueRange{}).getAsyncToken();
  Value workRows = b.create<arith::MulIOp>(count, c(b, rows));
  auto alloc = [&](ArrayRef<int64_t> shape, ValueRange sizes) {
    auto op = b.create<gpu::AllocOp>(MemRefType::get(shape, b.getF32Type()), tokenType,
                                     ValueRange{token}, sizes, ValueRange{});
    token = op.getAsyncToken();
    return op.getMemref();
  };
  const int64_t dyn = ShapedType::kDynamic;
  workAcc = alloc({dyn, dyn, dv}, {splits, workRows});
  workMax = alloc({dyn, dyn}, {splits, workRows});
  workSum = alloc({dyn, dyn}, {splits, workRows});
  emitLaunch(b, Phase::Partial, count, splits);
  emitLaunch(b, Phase::Combine, count, one);
  for (Value buffer : {workAcc, workMax, workSum})
    token = b.create<gpu::DeallocOp>(tokenType, ValueRange{token}, buffer).getAsyncToken();
  b.create<gpu::WaitOp>(Type(), ValueRange{token});
}

// The keys of this block's split of [lower, upper): split s takes `per` whole key blocks from
// lower + s * per (possibly none).
std::pair<Value, Value> MmaLowering::splitKeyRange(ImplicitLocOpBuilder& b, Value lower,
                                                   Value upper) {
  Value span = b.create<arith::MaxSIOp>(b.create<arith::SubIOp>(upper, lower), c(b, 0));
  Value per = b.create<arith::MulIOp>(
      b.create<arith::CeilDivSIOp>(b.create<arith::CeilDivSIOp>(span, c(b, block)), splitCount),
      c(b, block));
  lower = b.create<arith::AddIOp>(lower, b.create<arith::MulIOp>(splitIndex, per));
  upper = b.create<arith::MinSIOp>(upper, b.create<arith::AddIOp>(lower, per));
  return {lower, upper};
}

// The workspace row of a row of this task's tile.
Value MmaLowering::workspaceRow(ImplicitLocOpBuilder& b, Value rowInTile) {
  return b.create<arith::AddIOp>(b.create<arith::MulIOp>(taskIndex, c(b, rows)), rowInTile);
}

// A split's unnormalised state into the workspace: acc as the C fragments hold it, m and l
// (reduced over the quad) once per row.
void MmaLowering::emitPartialStore(ImplicitLocOpBuilder& b, IRMapping& map) {
  Value twoT = b.create<arith::MulIOp>(t, c(b, 2));
  for (int64_t r = 0; r < 2; ++r) {
    Value sum = quadReduce(b, sumRow[r], /*max=*/false);
    Value row = workspaceRow(b, myTileRows[r]);
    for (auto [n, fragment] : llvm::enumerate(acc)) {
      Value column = b.create<arith::AddIOp>(twoT, c(b, 8 * static_cast<int64_t>(n)));
      b.create<vector::StoreOp>(b.create<vector::ExtractOp>(fragment, r), workAcc,
                                ValueRange{splitIndex, row, column});
    }
    Value first = b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, t, c(b, 0));
    auto ifFirst = b.create<scf::IfOp>(first, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifFirst.thenBlock());
    b.create<memref::StoreOp>(maxRow[r], workMax, ValueRange{splitIndex, row});
    b.create<memref::StoreOp>(sum, workSum, ValueRange{splitIndex, row});
  }
}

// The merge of the splits, the block's threads taking the tile's (row, column) pairs in turn,
// so that a decode step's one row is merged by all of them: M = max_s m_s, w_s = exp(m_s - M)
// (0 for a split that kept nothing), L = sum_s w_s l_s, O = sum_s w_s acc_s / L (0 when L = 0),
// lse = M + c + log L (-inf when L = 0), stored with column 0. A thread recomputes its row's M
// and L from the workspace (a few loads the row's threads share) rather than exchanging them.
// A sink joins as one more split: m = sink, l = e^-c, acc = 0. Tile row r is query row r / G of
// head firstHead + r % G (G heads per task, 1 but in a decode tile).
void MmaLowering::emitCombine(ImplicitLocOpBuilder& b, IRMapping& map) {
  OnlineFinalizeOp finalize = ops.finalize;
  Value batchIndex = map.lookupOrDefault(finalize.getOffsets()[0]);
  Value firstHead = map.lookupOrDefault(finalize.getOffsets()[1]);
  Value rowBase = map.lookupOrDefault(finalize.getOffsets()[2]);
  Value columns = c(b, dv), heads = c(b, headsPerTask);
  Value pairs = b.create<arith::MulIOp>(
      b.create<arith::MulIOp>(map.lookupOrDefault(finalize.getSizes()[2]), heads), columns);
  Value zero = c(b, 0), splits = b.create<memref::DimOp>(workMax, 0);
  auto pairLoop = b.create<scf::ForOp>(tid, pairs, c(b, warps * kWarpSize));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(pairLoop.getBody()->getTerminator());
  Value pair = pairLoop.getInductionVar();
  Value rowInTile = b.create<arith::DivUIOp>(pair, columns);
  Value column = b.create<arith::RemUIOp>(pair, columns);
  Value row = b.create<arith::AddIOp>(rowBase, b.createOrFold<arith::DivUIOp>(rowInTile, heads));
  Value headIndex =
      b.createOrFold<arith::AddIOp>(firstHead, b.createOrFold<arith::RemUIOp>(rowInTile, heads));
  Value workRow = workspaceRow(b, rowInTile);
  Value sink;
  if (Value sinks = finalize.getSinks())
    sink = b.create<memref::LoadOp>(map.lookupOrDefault(sinks), ValueRange{headIndex});
  auto maxOf = [&](ImplicitLocOpBuilder& ib, Value s) -> Value {
    return ib.create<memref::LoadOp>(workMax, ValueRange{s, workRow});
  };
  auto sumOf = [&](ImplicitLocOpBuilder& ib, Value s) -> Value {
    return ib.create<memref::LoadOp>(workSum, ValueRange{s, workRow});
  };
  MergedSplits merged = softmax.mergeSplits(b, splits, maxOf, sumOf, sink);
  Value o =
      foldRange(b, zero, splits, {f32Constant(b, 0)},
                [&](ImplicitLocOpBuilder& ib, Value s, ValueRange x) {
                  Value a = ib.create<memref::LoadOp>(workAcc, ValueRange{s, workRow, column});
                  Value w = softmax.splitWeight(ib, merged, maxOf(ib, s));
                  return SmallVector<Value>{
                      ib.create<arith::AddFOp>(x[0], ib.create<arith::MulFOp>(w, a))};
                })
          .front();
  storeF32(b, b.create<arith::MulFOp>(o, merged.inverse), output,
           {batchIndex, headIndex, row, column});
  if (Value lse = finalize.getLse()) {
    // The partial states share the scale e^-c: lse = m + c + log l.
    auto ifFirst = b.create<scf::IfOp>(
        b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, column, zero), /*withElseRegion=*/false);
    b.setInsertionPointToStart(ifFirst.thenBlock());
    Value x = softmax.finishedLse(b, merged.max, merged.sum);
    b.create<memref::StoreOp>(x, map.lookupOrDefault(lse), ValueRange{batchIndex, headIndex, row});
  }
}

} // namespace attnc::attn
