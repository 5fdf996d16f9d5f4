//===- LowerBackward.cpp - attn.backward as phases of tasks ---------------------===//
//
// FlashAttention-2's backward on CPUs, deterministic by construction: each gradient element is
// written by one task, which adds its terms in ascending key (or row) order, one fused
// multiply-add at a time (BackwardSteps.h), so the result does not depend on the thread count
// or on which of the two forms below runs (no atomics, no partial buffers).
//
//   phase 1, per tile of `rows` query rows:   D_i = sum_c dO_ic O_ic          (workspace)
//   then, for each key block of `keyBlock` keys of a batch and KV head, for each head of its
//   group and each query tile the masks can keep, the tile's p and g (BackwardTile.h), and
//       dV[j, :] += sum_i p_ij dO[i, :]     dK[j, :] += sum_i g_ij Q[i, :]
//   in register tiles of keys x columns over the tile's rows, in one of two forms:
//
//   fused, where the call has at least kFusedTasks (batch, KV head) pairs: a task per pair
//     walks its key blocks in order and also adds dQ^T[:, i] += sum_j g_ij k_j into a
//     [B, H, d_k, Tq] workspace (the rows in lanes, as the forward's accumulator): five
//     products of T^2 d, FlashAttention's count;
//   split, where fewer pairs would leave threads idle (B H_kv = 1 on two cores): a task per
//     key block, then a task per query tile recomputes its p and g over the keys the masks
//     keep for dQ: seven products of T^2 d, all of them parallel.
//
//   last phase, per query tile: dQ from the workspace (fused) or recomputed (split).
//
// The choice depends on B and H_kv only, so a call's gradients are the same at any thread
// count.
//
//===---------------------------------------------------------------------------===//
#include "attn/IR/AttnOps.h"
#include "attn/Kit/Builders.h"
#include "attn/Kit/Elements.h"
#include "attn/Transforms/BackwardSteps.h"
#include "attn/Transforms/BackwardTile.h"
#include "attn/Transforms/Transforms.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc::attn {
namespace {

// The fewest (batch, KV head) pairs the fused form runs with: with fewer, its tasks would
// leave cores of a small machine idle.
constexpr int64_t kFusedTasks = 4;

// A key block task's stack buffers.
struct KeyBlockBuffers {
  Value accK, accV;      // [keyBlock, d_k], [keyBlock, d_v]: the block's dK and dV
  Value probs, grads;    // [keyBlock, rows]: a query tile's p and g at the block's keys
  Value rowsQ, rowsGrad; // [rows, d_k], [rows, d_v]: the tile's Q and dO rows
  TileBuffers tile;
};

class BackwardLowering {
public:
  BackwardLowering(ImplicitLocOpBuilder& b, BackwardOp op, const BackwardTiles& tiles,
                   const VectorOptions& options)
      : b(b), op(op), tiles(tiles), options(options) {}

  void emit();

private:
  int64_t dk() { return op.getQuery().getType().getDimSize(3); }
  int64_t dv() { return op.getValue().getType().getDimSize(3); }
  int64_t keyHeads() { return op.getKey().getType().getDimSize(1); }
  Value stack(ArrayRef<int64_t> shape) {
    return b.create<memref::AllocaOp>(MemRefType::get(shape, b.getF32Type()));
  }
  TileBuffers tileBuffers();
  KeyBlockBuffers keyBlockBuffers();
  // A forall of `tasks` tasks, or none where `run` is false; the builder left in its body.
  scf::ForallOp phase(Value tasks, Value run);
  void emitDelta();
  void emitKeyBlockTasks();
  void emitGroupTasks();
  // dK and dV of keys [firstKey, firstKey + keyCount) of (batch, kvHead), and with
  // `queryGrad` (the fused form's workspace) the keys' terms of dQ^T.
  void emitKeyBlock(ImplicitLocOpBuilder& eb, const KeyBlockBuffers& buffers, Value batch,
                    Value kvHead, Value firstKey, Value keyCount, Value queryGrad);
  void emitQueryTiles();

  ImplicitLocOpBuilder& b;
  BackwardOp op;
  const BackwardTiles tiles;
  const VectorOptions options;
  Value delta;     // [B, H, Tq] f32 workspace: D
  Value queryGrad; // [B, H, d_k, Tq rounded up to rows] f32 workspace: the fused form's dQ^T
  Value fused;     // i1: whether the fused form runs
};

TileBuffers BackwardLowering::tileBuffers() {
  return {stack({dk(), tiles.rows}), stack({dv(), tiles.rows}), stack({tiles.rows}),
          stack({tiles.rows})};
}

KeyBlockBuffers BackwardLowering::keyBlockBuffers() {
  const int64_t rows = tiles.rows, block = tiles.keyBlock;
  return {stack({block, dk()}), stack({block, dv()}), stack({block, rows}), stack({block, rows}),
          stack({rows, dk()}),  stack({rows, dv()}),  tileBuffers()};
}

scf::ForallOp BackwardLowering::phase(Value tasks, Value run) {
  Value count = b.create<arith::SelectOp>(run, tasks, indexConstant(b, 0));
  auto forall = b.create<scf::ForallOp>(ArrayRef<OpFoldResult>{count}, ValueRange{}, std::nullopt);
  b.setInsertionPointToStart(forall.getBody());
  return forall;
}

void BackwardLowering::emitDelta() {
  const QueryTiles task = forEachQueryTile(b, op, tiles.rows);
  Value batch = task.batch, head = task.head, row = task.row;
  forRange(b, indexConstant(b, 0), task.count, [&](ImplicitLocOpBuilder& rb, Value r) {
    Value at = rb.create<arith::AddIOp>(row, r);
    Value sum = foldRange(rb, indexConstant(rb, 0), indexConstant(rb, dv()), {f32Constant(rb, 0)},
                          [&](ImplicitLocOpBuilder& cb, Value c, ValueRange acc) {
                            const SmallVector<Value, 4> indices{batch, head, at, c};
                            Value product =
                                cb.create<arith::MulFOp>(loadF32(cb, op.getGradOutput(), indices),
                                                         loadF32(cb, op.getOutput(), indices));
                            return SmallVector<Value>{cb.create<arith::AddFOp>(acc[0], product)};
                          })
                    .front();
    rb.create<memref::StoreOp>(sum, delta, ValueRange{batch, head, at});
  });
  b.setInsertionPointAfter(task.loop);
}

void BackwardLowering::emitKeyBlock(ImplicitLocOpBuilder& eb, const KeyBlockBuffers& buffers,
                                    Value batch, Value kvHead, Value firstKey, Value keyCount,
                                    Value queryGrad) {
  const int64_t rows = tiles.rows, lanes = options.vectorWidth;
  const int64_t group = op.getNumHeads() / keyHeads();
  zeroBuffer(eb, buffers.accK);
  zeroBuffer(eb, buffers.accV);
  Value seqQ = op.getSeqQ(), endKey = eb.create<arith::AddIOp>(firstKey, keyCount);
  Value tileCount = eb.create<arith::CeilDivUIOp>(seqQ, indexConstant(eb, rows));
  Value firstHead = eb.create<arith::MulIOp>(kvHead, indexConstant(eb, group));
  Value lastHead = eb.create<arith::AddIOp>(firstHead, indexConstant(eb, group));
  forRange(eb, firstHead, lastHead, [&](ImplicitLocOpBuilder& hb, Value head) {
    forRange(hb, indexConstant(hb, 0), tileCount, [&](ImplicitLocOpBuilder& tb, Value tile) {
      Value row = tb.create<arith::MulIOp>(tile, indexConstant(tb, rows));
      Value count =
          tb.create<arith::MinSIOp>(indexConstant(tb, rows), tb.create<arith::SubIOp>(seqQ, row));
      BackwardTile queries(tb, op, batch, head, row, count, delta, buffers.tile, rows, options);
      const auto [lo, hi] = queries.keptKeys(tb, firstKey, endKey);
      Value first = lo, last = hi;
      Value any = tb.create<arith::CmpIOp>(arith::CmpIPredicate::ult, first, last);
      tb.create<scf::IfOp>(any, [&](OpBuilder& nested, Location loc) {
        ImplicitLocOpBuilder ib(loc, nested);
        queries.load(ib);
        copyRows(ib, op.getQuery(), batch, head, row, count, buffers.rowsQ);
        copyRows(ib, op.getGradOutput(), batch, head, row, count, buffers.rowsGrad);
        forKeyGroups(ib, first, last, options.keyUnroll,
                     [&](ImplicitLocOpBuilder& kb, ArrayRef<Value> keys) {
                       BackwardTile::Gradients g = queries.at(kb, keys);
                       for (auto [u, key] : llvm::enumerate(keys)) {
                         Value local = kb.create<arith::SubIOp>(key, firstKey);
                         for (int64_t r = 0; r < queries.vectors(); ++r) {
                           const SmallVector<Value, 2> at{local, indexConstant(kb, r * lanes)};
                           const int64_t i = u * queries.vectors() + r;
                           kb.create<vector::StoreOp>(g.probability[i], buffers.probs, at);
                           kb.create<vector::StoreOp>(g.score[i], buffers.grads, at);
                         }
                       }
                     });
        Value begin = ib.create<arith::SubIOp>(first, firstKey);
        Value end = ib.create<arith::SubIOp>(last, firstKey);
        accumulateKeyRows(ib, buffers.accV, buffers.probs, buffers.rowsGrad, begin, end, count,
                          lanes);
        accumulateKeyRows(ib, buffers.accK, buffers.grads, buffers.rowsQ, begin, end, count, lanes);
        if (queryGrad)
          accumulateColumnsOfBlock(ib, queryGrad, {batch, head}, row, buffers.grads,
                                   queries.vectors(), op.getKey(), batch, queries.keyHead(),
                                   firstKey, begin, end);
        ib.create<scf::YieldOp>();
      });
    });
  });
  auto fromStack = [](Value acc) {
    return [acc](ImplicitLocOpBuilder& cb, Value i, Value c) {
      return cb.create<memref::LoadOp>(acc, ValueRange{i, c}).getResult();
    };
  };
  storeRows(eb, op.getGradKey(), batch, kvHead, firstKey, keyCount, fromStack(buffers.accK));
  storeRows(eb, op.getGradValue(), batch, kvHead, firstKey, keyCount, fromStack(buffers.accV));
}

void BackwardLowering::emitKeyBlockTasks() {
  // The split form: a task per (batch, KV head, key block), task = (b H_kv + g) blocks + block.
  Value pairs = indexConstant(b, keyHeads());
  Value seqK = b.create<memref::DimOp>(op.getKey(), 2);
  Value block = indexConstant(b, tiles.keyBlock);
  Value blocks = b.create<arith::CeilDivUIOp>(seqK, block);
  Value tasks = b.create<arith::MulIOp>(
      b.create<arith::MulIOp>(b.create<memref::DimOp>(op.getQuery(), 0), pairs), blocks);
  scf::ForallOp forall =
      phase(tasks, b.create<arith::XOrIOp>(fused, b.create<arith::ConstantIntOp>(1, 1)));
  Value task = forall.getInductionVar(0);
  Value batchHead = b.create<arith::DivUIOp>(task, blocks);
  Value firstKey = b.create<arith::MulIOp>(b.create<arith::RemUIOp>(task, blocks), block);
  Value keyCount = b.create<arith::MinSIOp>(block, b.create<arith::SubIOp>(seqK, firstKey));
  const KeyBlockBuffers buffers = keyBlockBuffers();
  emitKeyBlock(b, buffers, b.create<arith::DivUIOp>(batchHead, pairs),
               b.create<arith::RemUIOp>(batchHead, pairs), firstKey, keyCount, Value());
  b.setInsertionPointAfter(forall);
}

void BackwardLowering::emitGroupTasks() {
  // The fused form: a task per (batch, KV head), its key blocks in order.
  Value pairs = indexConstant(b, keyHeads());
  Value tasks = b.create<arith::MulIOp>(b.create<memref::DimOp>(op.getQuery(), 0), pairs);
  scf::ForallOp forall = phase(tasks, fused);
  Value task = forall.getInductionVar(0);
  Value batch = b.create<arith::DivUIOp>(task, pairs),
        kvHead = b.create<arith::RemUIOp>(task, pairs);
  const KeyBlockBuffers buffers = keyBlockBuffers();
  // The group's dQ^T starts at 0: its rows are this task's alone.
  const int64_t group = op.getNumHeads() / keyHeads();
  Value firstHead = b.create<arith::MulIOp>(kvHead, indexConstant(b, group));
  Value width = b.create<memref::DimOp>(queryGrad, 3);
  forRange(b, firstHead, b.create<arith::AddIOp>(firstHead, indexConstant(b, group)),
           [&](ImplicitLocOpBuilder& hb, Value head) {
             forRange(hb, indexConstant(hb, 0), indexConstant(hb, dk()),
                      [&](ImplicitLocOpBuilder& cb, Value c) {
                        forRange(cb, indexConstant(cb, 0), width,
                                 [&](ImplicitLocOpBuilder& rb, Value r) {
                                   rb.create<memref::StoreOp>(f32Constant(rb, 0), queryGrad,
                                                              ValueRange{batch, head, c, r});
                                 });
                      });
           });
  Value seqK = b.create<memref::DimOp>(op.getKey(), 2);
  Value block = indexConstant(b, tiles.keyBlock);
  forRange(b, indexConstant(b, 0), b.create<arith::CeilDivUIOp>(seqK, block),
           [&](ImplicitLocOpBuilder& kb, Value index) {
             Value firstKey = kb.create<arith::MulIOp>(index, block);
             Value keyCount =
                 kb.create<arith::MinSIOp>(block, kb.create<arith::SubIOp>(seqK, firstKey));
             emitKeyBlock(kb, buffers, batch, kvHead, firstKey, keyCount, queryGrad);
           });
  b.setInsertionPointAfter(forall);
}

void BackwardLowering::emitQueryTiles() {
  const QueryTiles task = forEachQueryTile(b, op, tiles.rows);
  Value batch = task.batch, head = task.head, row = task.row, count = task.count;
  Value accQ = stack({dk(), tiles.rows}); // the split form's dQ^T: the rows in lanes
  const TileBuffers buffers = tileBuffers();
  auto fromWorkspace = [&](ImplicitLocOpBuilder& cb, Value i, Value c) {
    return cb
        .create<memref::LoadOp>(queryGrad,
                                ValueRange{batch, head, c, cb.create<arith::AddIOp>(row, i)})
        .getResult();
  };
  auto fromStack = [&](ImplicitLocOpBuilder& cb, Value i, Value c) {
    return cb.create<memref::LoadOp>(accQ, ValueRange{c, i}).getResult();
  };
  b.create<scf::IfOp>(
      fused,
      [&](OpBuilder& nested, Location loc) {
        ImplicitLocOpBuilder ib(loc, nested);
        storeRows(ib, op.getGradQuery(), batch, head, row, count, fromWorkspace);
        ib.create<scf::YieldOp>();
      },
      [&](OpBuilder& nested, Location loc) {
        ImplicitLocOpBuilder ib(loc, nested);
        zeroBuffer(ib, accQ);
        BackwardTile queries(ib, op, batch, head, row, count, delta, buffers, tiles.rows, options);
        const auto [lo, hi] =
            queries.keptKeys(ib, indexConstant(ib, 0), ib.create<memref::DimOp>(op.getKey(), 2));
        queries.load(ib);
        forKeyGroups(
            ib, lo, hi, options.keyUnroll, [&](ImplicitLocOpBuilder& kb, ArrayRef<Value> keys) {
              BackwardTile::Gradients g = queries.at(kb, keys);
              accumulateColumns(kb, accQ, {}, indexConstant(kb, 0), g.score, queries.vectors(),
                                op.getKey(), batch, queries.keyHead(), keys);
            });
        storeRows(ib, op.getGradQuery(), batch, head, row, count, fromStack);
        ib.create<scf::YieldOp>();
      });
  b.setInsertionPointAfter(task.loop);
}

void BackwardLowering::emit() {
  Value batches = b.create<memref::DimOp>(op.getQuery(), 0);
  Value seqQ = op.getSeqQ();
  Value rows = indexConstant(b, tiles.rows);
  Value paddedRows = b.create<arith::MulIOp>(b.create<arith::CeilDivUIOp>(seqQ, rows), rows);
  const int64_t heads = op.getNumHeads();
  constexpr int64_t dynamic = ShapedType::kDynamic;
  delta = b.create<memref::AllocOp>(MemRefType::get({dynamic, heads, dynamic}, b.getF32Type()),
                                    ValueRange{batches, seqQ});
  queryGrad =
      b.create<memref::AllocOp>(MemRefType::get({dynamic, heads, dk(), dynamic}, b.getF32Type()),
                                ValueRange{batches, paddedRows});
  fused = b.create<arith::CmpIOp>(arith::CmpIPredicate::uge,
                                  b.create<arith::MulIOp>(batches, indexConstant(b, keyHeads())),
                                  indexConstant(b, kFusedTasks));
  emitDelta();
  emitKeyBlockTasks();
  emitGroupTasks();
  emitQueryTiles();
  b.create<memref::DeallocOp>(delta);
  b.create<memref::DeallocOp>(queryGrad);
}

} // namespace

LogicalResult lowerBackward(RewriterBase& rewriter, BackwardOp op, const BackwardTiles& tiles,
                            const VectorOptions& options) {
  if (options.vectorWidth <= 0 || tiles.rows <= 0 || tiles.rows % options.vectorWidth != 0)
    return op.emitOpError() << "lower_backward: the tile's " << tiles.rows
                            << " rows must be a positive multiple of the vector width "
                            << options.vectorWidth;
  if (tiles.keyBlock <= 0 || options.keyUnroll <= 0)
    return op.emitOpError() << "lower_backward: key_block and key_unroll must be positive";
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  BackwardLowering(b, op, tiles, options).emit();
  rewriter.eraseOp(op);
  return success();
}

} // namespace attnc::attn
