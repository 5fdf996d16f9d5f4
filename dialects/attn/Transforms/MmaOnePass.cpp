//===- MmaOnePass.cpp - the one-pass tensor-core kernel of a task -------------===//
//
// One GPU block runs one task: a (batch, head, query tile) of 16 W rows, with W warps, or a
// decode tile's (batch, KV head, query rows of each head of its group); warp w owns rows
// 16w .. 16w + 15 of the tile. Per key block of Bc keys, with m16n8k16 MMAs (f16 or
// bf16 operands, f32 accumulators):
//
//   S  = Q K^T                 Q's A fragments stay in registers for the whole task; K's B
//                              fragments come from shared memory by ldmatrix
//   S  = terms(scale * S)      softcap, ALiBi, bias, masks (ScoreTerms); keys past the block
//                              -inf
//   m' = max(m, rowmax S)      each row's max is reduced over the 4 lanes that hold it (two
//                              xor shuffles)
//   P  = exp(S - m')           l = exp(m - m') l + rowsum P, as per-lane partial sums reduced
//                              once at the end
//   P  = D P                   dropout's factor (ScoreTerms), after the row sums took P
//   O  = exp(m - m') O + P V   P's C fragments are A fragments as they are (no shared memory);
//                              V's B fragments come by ldmatrix.trans
//
// K and V tiles reach shared memory by cp.async: V_j loads while S_j is computed and K_{j+1}
// while P_j V_j is. Their rows are padded by 8 elements (16 bytes), so the 8 row addresses of
// an ldmatrix fall in different banks.
//
// The launch and the key loop serve the split-key kernels too (MmaSplitKey.cpp).
//
//===---------------------------------------------------------------------------===//
#include "attn/Kit/CacheRows.h"
#include "attn/Kit/OnlineState.h"
#include "attn/Kit/Products.h"
#include "attn/Transforms/MmaLowering.h"
#include "bundle/MmaContract.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <tuple>

using namespace mlir;

namespace attnc::attn {

// One gpu.launch of the task loop for `phase`: blocks (tasks, splits) of 16-row warps (the
// merge's threads share the tile's (row, column) pairs); the task's own index arithmetic is
// cloned into it.
void MmaLowering::emitLaunch(ImplicitLocOpBuilder& b, Phase phase, Value count, Value splits) {
  Value one = c(b, 1);
  Value threads = c(b, warps * kWarpSize);
  auto launch = b.create<gpu::LaunchOp>(count, splits, one, threads, one, one);
  if (phase != Phase::Combine) {
    auto workgroup = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
    sharedK = launch.addWorkgroupAttribution(
        MemRefType::get({block, dk + kMmaRowPad}, element, MemRefLayoutAttrInterface(), workgroup),
        b.getLoc());
    sharedV = launch.addWorkgroupAttribution(
        MemRefType::get({block, dv + kMmaRowPad}, element, MemRefLayoutAttrInterface(), workgroup),
        b.getLoc());
    sharedKScale = sharedVScale = Value();
    if (update.getKeyScale()) {
      auto scales =
          MemRefType::get({block}, b.getF32Type(), MemRefLayoutAttrInterface(), workgroup);
      sharedKScale = launch.addWorkgroupAttribution(scales, b.getLoc());
      sharedVScale = launch.addWorkgroupAttribution(scales, b.getLoc());
    }
  }
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&launch.getBody().front());
  taskIndex = launch.getBlockIds().x;
  splitIndex = launch.getBlockIds().y;
  splitCount = launch.getGridSize().y;
  emitLaneIds(b);
  queryFrags.clear();

  // The task's own ops in order; the state buffers and the online ops become registers.
  IRMapping map;
  map.map(tasks.getInductionVar(0), taskIndex);
  llvm::SmallPtrSet<Operation*, 4> stateBuffers;
  for (Value buffer : ops.init->getOperands())
    stateBuffers.insert(buffer.getDefiningOp());
  for (Operation& op : tasks.getBody()->without_terminator()) {
    if (&op == ops.keys.getOperation()) {
      if (phase != Phase::Combine)
        emitKeyLoop(b, map, phase);
    } else if (&op == ops.finalize.getOperation()) {
      if (phase == Phase::Whole)
        emitFinalize(b, map);
      else if (phase == Phase::Partial)
        emitPartialStore(b, map);
      else
        emitCombine(b, map);
    } else if (&op != ops.init.getOperation() && !stateBuffers.contains(&op)) {
      b.clone(op, map);
    }
  }
  b.create<gpu::TerminatorOp>();
}

void MmaLowering::emitKeyLoop(ImplicitLocOpBuilder& b, IRMapping& map, Phase phase) {
  placeTask(b, map);
  // The first K tile, then the loop over key blocks with the state in registers.
  scf::ForOp keys = ops.keys;
  Value lower = map.lookupOrDefault(keys.getLowerBound()),
        upper = map.lookupOrDefault(keys.getUpperBound());
  if (phase == Phase::Partial)
    std::tie(lower, upper) = splitKeyRange(b, lower, upper);
  waitAndSync(b, copyTile(b, key, sharedK, dk, lower, upper, update.getKeyScale(), sharedKScale));
  SmallVector<Value> state{f32Constant(b, -kInf), f32Constant(b, -kInf), f32Constant(b, 0),
                           f32Constant(b, 0)};
  state.append(dv / 8, splatConstant(b, cType, 0));
  auto loop = b.create<scf::ForOp>(lower, upper, c(b, block), state);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    map.map(keys.getInductionVar(), loop.getInductionVar());
    for (Operation& op : keys.getBody()->without_terminator())
      if (&op != update.getOperation())
        b.clone(op, map);
    b.create<scf::YieldOp>(
        emitKeyBlock(b, map, loop.getInductionVar(), upper, loop.getRegionIterArgs()));
  }
  maxRow[0] = loop.getResult(0);
  maxRow[1] = loop.getResult(1);
  sumRow[0] = loop.getResult(2);
  sumRow[1] = loop.getResult(3);
  acc.assign(loop.getResults().begin() + 4, loop.getResults().end());
}

void MmaLowering::placeTask(ImplicitLocOpBuilder& b, IRMapping& map) {
  ValueRange offsets = update.getOffsets();
  batch = map.lookupOrDefault(offsets[0]);
  head = map.lookupOrDefault(offsets[1]);
  kvHead = ScoreTerms::kvHeadOf(b, update, head);
  emitRows(b, map.lookupOrDefault(offsets[2]));
  lastRow = b.create<arith::SubIOp>(map.lookupOrDefault(update.getSeqQ()), c(b, 1));
  lastKey = b.create<arith::SubIOp>(CacheRows::keys(b, key, update.getBlockTable()), c(b, 1));
  cache.emplace(b, key, update.getBlockTable());
  sequenceEnd = Value();
  if (update.getBlockTable()) {
    sequenceEnd = b.create<arith::IndexCastOp>(
        b.getIndexType(), b.create<memref::LoadOp>(update.getSeqLens(), ValueRange{batch}));
  }
  Value off = ScoreTerms::positionOffset(b, update);
  positions = rowsVector(b, i32(b, b.create<arith::AddIOp>(myRows[0], off)),
                         i32(b, b.create<arith::AddIOp>(myRows[1], off)), cTypeI32);
  emitQueryFragments(b, query);
}

SmallVector<Value> MmaLowering::emitKeyBlock(ImplicitLocOpBuilder& b, IRMapping& map,
                                             Value keyBlock, Value upper, ValueRange carried) {
  Value keyEnd = b.create<arith::AddIOp>(keyBlock, map.lookupOrDefault(update.getSizes()[3]));
  Value valueGroup =
      copyTile(b, value, sharedV, dv, keyBlock, keyEnd, update.getValueScale(), sharedVScale);
  SmallVector<Value> s = emitScores(b);
  // Quantized keys: S = (Q K_codes^T) k_scale, column by column.
  if (sharedKScale)
    for (auto [j, sj] : llvm::enumerate(s))
      sj = b.create<arith::MulFOp>(sj, fragmentScales(b, sharedKScale, static_cast<int64_t>(j)));
  applyTerms(b, s, keyBlock, keyEnd);
  BlockSoftmax step = emitBlockSoftmax(b, s, keyBlock, carried);

  // V has landed and every warp is done with K: fetch the next K tile during P V.
  waitAndSync(b, valueGroup);
  Value nextBlock = b.create<arith::AddIOp>(keyBlock, c(b, block));
  Value keyGroup =
      copyTile(b, key, sharedK, dk, nextBlock, upper, update.getKeyScale(), sharedKScale);
  SmallVector<Value> o = emitValueProducts(b, s, step, carried);
  waitAndSync(b, keyGroup);
  SmallVector<Value> next{step.newMax[0], step.newMax[1], step.sums[0], step.sums[1]};
  next.append(o);
  return next;
}

MmaLowering::BlockSoftmax MmaLowering::emitBlockSoftmax(ImplicitLocOpBuilder& b,
                                                        SmallVector<Value>& s, Value keyBlock,
                                                        ValueRange carried) {
  BlockSoftmax step;
  // m' = max(m, rowmax S); alpha = exp(m - m') (0 while m = -inf); P = exp(S - m' - c), its
  // scale e^-c keeping the accumulators from overflowing (c: `softmax`'s shift, OnlineState).
  Value offsets[2];
  for (int64_t r = 0; r < 2; ++r) {
    Value x = carried[r];
    for (Value sj : s)
      for (int64_t col = 0; col < 2; ++col)
        x = b.create<arith::MaximumFOp>(x,
                                        b.create<vector::ExtractOp>(sj, ArrayRef<int64_t>{r, col}));
    step.newMax[r] = quadReduce(b, x, /*max=*/true);
    Value safe = softmax.finiteMax(b, step.newMax[r]);
    offsets[r] = softmax.probabilityOffset(b, safe);
    step.alpha[r] = softmax.rescaleFactor(b, carried[r], safe);
  }
  Value offset = rowsVector(b, offsets[0], offsets[1], cType);
  step.sums[0] = b.create<arith::MulFOp>(step.alpha[0], carried[2]);
  step.sums[1] = b.create<arith::MulFOp>(step.alpha[1], carried[3]);
  for (auto [j, sj] : llvm::enumerate(s)) {
    Value masked =
        b.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, sj, splatConstant(b, cType, -kInf));
    sj = b.create<arith::SelectOp>(masked, splatConstant(b, cType, 0),
                                   softmax.probability(b, sj, offset));
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t col = 0; col < 2; ++col)
        step.sums[r] = b.create<arith::AddFOp>(
            step.sums[r], b.create<vector::ExtractOp>(sj, ArrayRef<int64_t>{r, col}));
    sj = applyDropout(b, sj, keyBlock, static_cast<int64_t>(j)); // weights P V only
  }
  return step;
}

SmallVector<Value> MmaLowering::emitValueProducts(ImplicitLocOpBuilder& b, ArrayRef<Value> s,
                                                  const BlockSoftmax& step, ValueRange carried) {
  // O = alpha O + P V.
  Value alphaRows = rowsVector(b, step.alpha[0], step.alpha[1], cType);
  SmallVector<Value> o;
  for (Value x : carried.drop_front(4))
    o.push_back(b.create<arith::MulFOp>(x, alphaRows));
  // Quantized values: P V = (P v_scale) V_codes, the scales per key (column of P).
  SmallVector<Value> weighted(s);
  if (sharedVScale)
    for (auto [j, pj] : llvm::enumerate(weighted))
      pj = b.create<arith::MulFOp>(pj, fragmentScales(b, sharedVScale, static_cast<int64_t>(j)));
  accumulateProducts(b, weighted, sharedV, dv, o);
  return o;
}

// O = acc / l (0 where l = 0) and lse = m + c + log l (-inf where l = 0), for the rows < Tq;
// with sinks, the head's sink folded into (m, l, acc) first.
void MmaLowering::emitFinalize(ImplicitLocOpBuilder& b, IRMapping& map) {
  OnlineFinalizeOp finalize = ops.finalize;
  Value rowEnd = b.create<arith::AddIOp>(map.lookupOrDefault(finalize.getOffsets()[2]),
                                         map.lookupOrDefault(finalize.getSizes()[2]));
  Type outElement = cast<MemRefType>(output.getType()).getElementType();
  auto outPair = VectorType::get({2}, outElement);
  Value twoT = b.create<arith::MulIOp>(t, c(b, 2));
  Value sinks = finalize.getSinks() ? map.lookupOrDefault(finalize.getSinks()) : Value();
  for (int64_t r = 0; r < 2; ++r) {
    Value sink =
        sinks ? b.create<memref::LoadOp>(sinks, ValueRange{myHeads[r]}).getResult() : Value();
    FinishedRow finished =
        softmax.finish(b, maxRow[r], quadReduce(b, sumRow[r], /*max=*/false), sink);
    Value live = b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, myRows[r], rowEnd);
    auto ifLive = b.create<scf::IfOp>(live, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifLive.thenBlock());
    Value inverseRow =
        b.create<vector::BroadcastOp>(VectorType::get({2}, b.getF32Type()), finished.inverse);
    for (auto [n, fragment] : llvm::enumerate(acc)) {
      Value x = b.create<arith::MulFOp>(b.create<vector::ExtractOp>(fragment, r), inverseRow);
      if (outElement != b.getF32Type())
        x = b.create<arith::TruncFOp>(outPair, x);
      Value column = b.create<arith::AddIOp>(twoT, c(b, 8 * static_cast<int64_t>(n)));
      b.create<vector::StoreOp>(x, output, ValueRange{batch, myHeads[r], myRows[r], column});
    }
    if (Value lse = finalize.getLse()) {
      Value first = b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, t, c(b, 0));
      auto ifFirst = b.create<scf::IfOp>(first, /*withElseRegion=*/false);
      b.setInsertionPointToStart(ifFirst.thenBlock());
      b.create<memref::StoreOp>(softmax.finishedLse(b, finished.max, finished.sum),
                                map.lookupOrDefault(lse), ValueRange{batch, myHeads[r], myRows[r]});
    }
  }
}

} // namespace attnc::attn
