//===- LowerBackward.cpp - attn.backward as three phases of tasks --------------===//
//
// FlashAttention-2's backward on CPUs, deterministic by construction: each gradient element is
// written by one task, which sums its terms in a fixed order, so the result does not depend on
// the thread count (no atomics, no partial buffers).
//
//   phase 1, per tile of `rows` query rows:   D_i = sum_c dO_ic O_ic          (workspace)
//   phase 2, per block of `keyBlock` keys of a batch and KV head: for each head of its group
//            and each query tile the masks can keep, the tile's p and g (BackwardTile.h), then
//              dV[j, :] += sum_i p_ij dO[i, :]     dK[j, :] += sum_i g_ij Q[i, :]
//            register tiles of keys x columns over the tile's rows (rankOneUpdate)
//   phase 3, per query tile: over the keys the masks can keep, dQ^T[:, i] += sum_j g_ij k_j,
//            the rows in vector lanes as the forward's accumulator
//
// The scores are recomputed in phases 2 and 3 (seven products of T^2 d where the forward has
// two), the price of writing dQ without atomics or a per-key-block copy of it.
//
//===---------------------------------------------------------------------------===//
#include "attn/IR/AttnOps.h"
#include "attn/Kit/Builders.h"
#include "attn/Kit/Elements.h"
#include "attn/Kit/Products.h"
#include "attn/Transforms/BackwardTile.h"
#include "attn/Transforms/Transforms.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc::attn {
namespace {

// for (j = lo; j < hi; j += unroll) body(j, ..., j + unroll - 1), then the keys left one at a
// time.
void forKeyGroups(ImplicitLocOpBuilder& b, Value lo, Value hi, int64_t unroll,
                  const std::function<void(ImplicitLocOpBuilder&, ArrayRef<Value>)>& body) {
  Value whole = b.create<arith::SubIOp>(
      hi, b.create<arith::RemUIOp>(b.create<arith::SubIOp>(hi, lo), indexConstant(b, unroll)));
  auto loop = [&](Value begin, Value end, int64_t step) {
    b.create<scf::ForOp>(begin, end, indexConstant(b, step), std::nullopt,
                         [&](OpBuilder& nested, Location loc, Value j, ValueRange) {
                           ImplicitLocOpBuilder ib(loc, nested);
                           SmallVector<Value> keys;
                           for (int64_t u = 0; u < step; ++u)
                             keys.push_back(ib.create<arith::AddIOp>(j, indexConstant(ib, u)));
                           body(ib, keys);
                           ib.create<scf::YieldOp>();
                         });
  };
  loop(lo, whole, unroll);
  loop(whole, hi, 1);
}

// buffer[i, c] = 0 for every element of a 2-d stack buffer.
void zeroBuffer(ImplicitLocOpBuilder& b, Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  Value zero = f32Constant(b, 0);
  forRange(b, indexConstant(b, 0), indexConstant(b, type.getDimSize(0)),
           [&](ImplicitLocOpBuilder& rb, Value i) {
             forRange(rb, indexConstant(rb, 0), indexConstant(rb, type.getDimSize(1)),
                      [&](ImplicitLocOpBuilder& cb, Value c) {
                        cb.create<memref::StoreOp>(zero, buffer, ValueRange{i, c});
                      });
           });
}

// The widest vector of at most `lanes` f32 (a power of two) whose width divides d.
int64_t columnWidth(int64_t d, int64_t lanes) {
  int64_t width = lanes;
  while (width > 1 && d % width != 0)
    width /= 2;
  return width;
}

class BackwardLowering {
public:
  BackwardLowering(ImplicitLocOpBuilder& b, BackwardOp op, const BackwardTiles& tiles,
                   const VectorOptions& options)
      : b(b), op(op), tiles(tiles), options(options) {}

  void emit();

private:
  int64_t dk() { return op.getQuery().getType().getDimSize(3); }
  int64_t dv() { return op.getValue().getType().getDimSize(3); }
  Value stack(ArrayRef<int64_t> shape) {
    return b.create<memref::AllocaOp>(MemRefType::get(shape, b.getF32Type()));
  }
  TileBuffers tileBuffers();
  void emitDelta();
  void emitKeyBlocks();
  void emitKeyBlock(Value batch, Value kvHead, Value firstKey, Value keyCount);
  void emitQueryTiles();
  // acc[j, :] += sum_(r < count) weights[j, r] rowsOf[r, :] for j in [begin, end).
  void accumulateKeyRows(ImplicitLocOpBuilder& ib, Value acc, Value weights, Value rowsOf,
                         Value begin, Value end, Value count);
  // dst[r, c] = src[batch, head, row + r, c] for r < count (f32).
  void copyRows(ImplicitLocOpBuilder& ib, Value src, Value batch, Value head, Value row,
                Value count, Value dst);
  // grad[batch, head, first + i, c] = acc[i, c] (or acc[c, i] when transposed) for i < count.
  void storeRows(ImplicitLocOpBuilder& ib, Value acc, bool transposed, Value grad, Value batch,
                 Value head, Value first, Value count);

  ImplicitLocOpBuilder& b;
  BackwardOp op;
  const BackwardTiles tiles;
  const VectorOptions options;
  Value delta; // [B, H, Tq] f32 workspace: D
};

TileBuffers BackwardLowering::tileBuffers() {
  return {stack({dk(), tiles.rows}), stack({dv(), tiles.rows}), stack({tiles.rows}),
          stack({tiles.rows})};
}

void BackwardLowering::copyRows(ImplicitLocOpBuilder& ib, Value src, Value batch, Value head,
                                Value row, Value count, Value dst) {
  const int64_t d = cast<MemRefType>(dst.getType()).getDimSize(1);
  forRange(ib, indexConstant(ib, 0), count, [&](ImplicitLocOpBuilder& rb, Value r) {
    Value at = rb.create<arith::AddIOp>(row, r);
    forRange(
        rb, indexConstant(rb, 0), indexConstant(rb, d), [&](ImplicitLocOpBuilder& cb, Value c) {
          cb.create<memref::StoreOp>(loadF32(cb, src, {batch, head, at, c}), dst, ValueRange{r, c});
        });
  });
}

void BackwardLowering::storeRows(ImplicitLocOpBuilder& ib, Value acc, bool transposed, Value grad,
                                 Value batch, Value head, Value first, Value count) {
  const int64_t d = cast<MemRefType>(grad.getType()).getDimSize(3);
  forRange(ib, indexConstant(ib, 0), count, [&](ImplicitLocOpBuilder& rb, Value i) {
    Value position = rb.create<arith::AddIOp>(first, i);
    forRange(rb, indexConstant(rb, 0), indexConstant(rb, d),
             [&](ImplicitLocOpBuilder& cb, Value c) {
               SmallVector<Value, 2> at =
                   transposed ? SmallVector<Value, 2>{c, i} : SmallVector<Value, 2>{i, c};
               Value value = cb.create<memref::LoadOp>(acc, at);
               storeF32(cb, value, grad, {batch, head, position, c});
             });
  });
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

void BackwardLowering::accumulateKeyRows(ImplicitLocOpBuilder& ib, Value acc, Value weights,
                                         Value rowsOf, Value begin, Value end, Value count) {
  const int64_t d = cast<MemRefType>(acc.getType()).getDimSize(1);
  const int64_t width = columnWidth(d, options.vectorWidth);
  // Register tiles of `unroll` keys x `columns` vectors, at most 24 accumulators.
  const int64_t columns = std::min<int64_t>(d / width, 16);
  const int64_t unroll = std::clamp<int64_t>(24 / columns, 1, 8);
  auto vector = VectorType::get({width}, ib.getF32Type());
  forKeyGroups(ib, begin, end, unroll, [&](ImplicitLocOpBuilder& kb, ArrayRef<Value> keys) {
    for (int64_t c0 = 0; c0 < d / width; c0 += columns) {
      const int64_t n = std::min(columns, d / width - c0);
      auto column = [&](ImplicitLocOpBuilder& cb, int64_t c) {
        return indexConstant(cb, (c0 + c) * width);
      };
      SmallVector<Value> regs;
      for (Value key : keys)
        for (int64_t c = 0; c < n; ++c)
          regs.push_back(kb.create<vector::LoadOp>(vector, acc, ValueRange{key, column(kb, c)}));
      regs =
          foldRange(kb, indexConstant(kb, 0), count, regs,
                    [&](ImplicitLocOpBuilder& rb, Value r, ValueRange carried) {
                      SmallVector<Value> rowVectors, scalars;
                      for (int64_t c = 0; c < n; ++c)
                        rowVectors.push_back(rb.create<vector::LoadOp>(
                            vector, rowsOf, ValueRange{r, column(rb, c)}));
                      for (Value key : keys)
                        scalars.push_back(rb.create<memref::LoadOp>(weights, ValueRange{key, r}));
                      return rankOneUpdate(rb, rowVectors, scalars, carried);
                    });
      for (auto [u, key] : llvm::enumerate(keys))
        for (int64_t c = 0; c < n; ++c)
          kb.create<vector::StoreOp>(regs[u * n + c], acc, ValueRange{key, column(kb, c)});
    }
  });
}

void BackwardLowering::emitKeyBlock(Value batch, Value kvHead, Value firstKey, Value keyCount) {
  const int64_t rows = tiles.rows, block = tiles.keyBlock;
  const int64_t group = op.getNumHeads() / op.getKey().getType().getDimSize(1);
  Value accK = stack({block, dk()}), accV = stack({block, dv()});
  Value probs = stack({block, rows}), grads = stack({block, rows});
  Value rowsQ = stack({rows, dk()}), rowsGrad = stack({rows, dv()});
  const TileBuffers buffers = tileBuffers();
  zeroBuffer(b, accK);
  zeroBuffer(b, accV);
  Value seqQ = op.getSeqQ(), endKey = b.create<arith::AddIOp>(firstKey, keyCount);
  Value tileCount = b.create<arith::CeilDivUIOp>(seqQ, indexConstant(b, rows));
  Value firstHead = b.create<arith::MulIOp>(kvHead, indexConstant(b, group));
  Value lastHead = b.create<arith::AddIOp>(firstHead, indexConstant(b, group));
  forRange(b, firstHead, lastHead, [&](ImplicitLocOpBuilder& hb, Value head) {
    forRange(hb, indexConstant(hb, 0), tileCount, [&](ImplicitLocOpBuilder& tb, Value tile) {
      Value row = tb.create<arith::MulIOp>(tile, indexConstant(tb, rows));
      Value count =
          tb.create<arith::MinSIOp>(indexConstant(tb, rows), tb.create<arith::SubIOp>(seqQ, row));
      BackwardTile queries(tb, op, batch, head, row, count, delta, buffers, rows, options);
      const auto [lo, hi] = queries.keptKeys(tb, firstKey, endKey);
      Value first = lo, last = hi;
      Value any = tb.create<arith::CmpIOp>(arith::CmpIPredicate::ult, first, last);
      tb.create<scf::IfOp>(any, [&](OpBuilder& nested, Location loc) {
        ImplicitLocOpBuilder ib(loc, nested);
        queries.load(ib);
        copyRows(ib, op.getQuery(), batch, head, row, count, rowsQ);
        copyRows(ib, op.getGradOutput(), batch, head, row, count, rowsGrad);
        forKeyGroups(
            ib, first, last, options.keyUnroll,
            [&](ImplicitLocOpBuilder& kb, ArrayRef<Value> keys) {
              BackwardTile::Gradients g = queries.at(kb, keys);
              for (auto [u, key] : llvm::enumerate(keys)) {
                Value local = kb.create<arith::SubIOp>(key, firstKey);
                for (int64_t r = 0; r < queries.vectors(); ++r) {
                  const SmallVector<Value, 2> at{local, indexConstant(kb, r * options.vectorWidth)};
                  kb.create<vector::StoreOp>(g.probability[u * queries.vectors() + r], probs, at);
                  kb.create<vector::StoreOp>(g.score[u * queries.vectors() + r], grads, at);
                }
              }
            });
        Value begin = ib.create<arith::SubIOp>(first, firstKey);
        Value end = ib.create<arith::SubIOp>(last, firstKey);
        accumulateKeyRows(ib, accV, probs, rowsGrad, begin, end, count);
        accumulateKeyRows(ib, accK, grads, rowsQ, begin, end, count);
        ib.create<scf::YieldOp>();
      });
    });
  });
  storeRows(b, accK, /*transposed=*/false, op.getGradKey(), batch, kvHead, firstKey, keyCount);
  storeRows(b, accV, /*transposed=*/false, op.getGradValue(), batch, kvHead, firstKey, keyCount);
}

void BackwardLowering::emitKeyBlocks() {
  // One task per (batch, KV head, key block): task = (b * H_kv + g) * blocks + block.
  Value keyHeads = indexConstant(b, op.getKey().getType().getDimSize(1));
  Value seqK = b.create<memref::DimOp>(op.getKey(), 2);
  Value block = indexConstant(b, tiles.keyBlock);
  Value blocks = b.create<arith::CeilDivUIOp>(seqK, block);
  Value tasks = b.create<arith::MulIOp>(
      b.create<arith::MulIOp>(b.create<memref::DimOp>(op.getQuery(), 0), keyHeads), blocks);
  auto forall = b.create<scf::ForallOp>(ArrayRef<OpFoldResult>{tasks}, ValueRange{}, std::nullopt);
  b.setInsertionPointToStart(forall.getBody());
  Value task = forall.getInductionVar(0);
  Value batchHead = b.create<arith::DivUIOp>(task, blocks);
  Value firstKey = b.create<arith::MulIOp>(b.create<arith::RemUIOp>(task, blocks), block);
  Value keyCount = b.create<arith::MinSIOp>(block, b.create<arith::SubIOp>(seqK, firstKey));
  emitKeyBlock(b.create<arith::DivUIOp>(batchHead, keyHeads),
               b.create<arith::RemUIOp>(batchHead, keyHeads), firstKey, keyCount);
  b.setInsertionPointAfter(forall);
}

void BackwardLowering::emitQueryTiles() {
  const QueryTiles task = forEachQueryTile(b, op, tiles.rows);
  Value batch = task.batch, head = task.head, row = task.row, count = task.count;
  const int64_t lanes = options.vectorWidth;
  Value accQ = stack({dk(), tiles.rows}); // dQ^T: the rows in lanes
  const TileBuffers buffers = tileBuffers();
  zeroBuffer(b, accQ);
  BackwardTile queries(b, op, batch, head, row, count, delta, buffers, tiles.rows, options);
  const auto [lo, hi] =
      queries.keptKeys(b, indexConstant(b, 0), b.create<memref::DimOp>(op.getKey(), 2));
  queries.load(b);
  auto vector = VectorType::get({lanes}, b.getF32Type());
  forKeyGroups(b, lo, hi, options.keyUnroll, [&](ImplicitLocOpBuilder& kb, ArrayRef<Value> keys) {
    BackwardTile::Gradients g = queries.at(kb, keys);
    forRange(
        kb, indexConstant(kb, 0), indexConstant(kb, dk()), [&](ImplicitLocOpBuilder& cb, Value c) {
          SmallVector<Value> acc;
          for (int64_t r = 0; r < queries.vectors(); ++r)
            acc.push_back(cb.create<vector::LoadOp>(vector, accQ,
                                                    ValueRange{c, indexConstant(cb, r * lanes)}));
          for (auto [u, key] : llvm::enumerate(keys)) {
            Value k = loadF32(cb, op.getKey(), {batch, queries.keyHead(), key, c});
            ArrayRef<Value> scores =
                ArrayRef(g.score).slice(u * queries.vectors(), queries.vectors());
            acc = rankOneUpdate(cb, scores, {k}, acc);
          }
          for (int64_t r = 0; r < queries.vectors(); ++r)
            cb.create<vector::StoreOp>(acc[r], accQ, ValueRange{c, indexConstant(cb, r * lanes)});
        });
  });
  storeRows(b, accQ, /*transposed=*/true, op.getGradQuery(), batch, head, row, count);
  b.setInsertionPointAfter(task.loop);
}

void BackwardLowering::emit() {
  Value batches = b.create<memref::DimOp>(op.getQuery(), 0);
  Value seqQ = op.getSeqQ();
  delta = b.create<memref::AllocOp>(
      MemRefType::get(
          {ShapedType::kDynamic, static_cast<int64_t>(op.getNumHeads()), ShapedType::kDynamic},
          b.getF32Type()),
      ValueRange{batches, seqQ});
  emitDelta();
  emitKeyBlocks();
  emitQueryTiles();
  b.create<memref::DeallocOp>(delta);
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
