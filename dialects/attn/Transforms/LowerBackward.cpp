//===- LowerBackward.cpp - attn.backward as phases of tasks ---------------------===//
//
// FlashAttention-2's backward on CPUs, deterministic by construction: each element of dK, dV
// and of a chunk's copy of dQ is written by one task, which adds its terms in ascending key
// (or row) order (BackwardSteps.h), and the copies are summed in order: no atomics.
//
//   phase 1, per tile of `rows` query rows:   D_i = sum_c dO_ic O_ic          (workspace)
//   phase 2, per (batch, KV head, key chunk): for each key block of up to `keyBlock` keys of the
//     chunk in order, each head of the group and each query tile the masks can keep, the
//     tile's p and g (BackwardTile.h), then
//       dV[j, :] += sum_i p_ij dO[i, :]     dK[j, :] += sum_i g_ij Q[i, :]
//       dQ^T_s[:, i] += sum_j g_ij k_j      (the chunk's own copy s of dQ^T, rows in lanes)
//     in register tiles over the block's keys or the tile's rows: five products of T^2 d,
//     FlashAttention's count, with no score recomputed;
//   phase 3, per query tile: dQ = sum_s dQ^T_s, the chunks in order;
//   with sinks, phase 1 also forms each tile's part of d sink_h = -sum_i exp(sink_h - lse_i) D_i
//   and a phase 4 task per head sums the parts in order;
//   with aux_grads (float aux tensors score_mod reads), each phase 2 task adds its scores'
//   terms into a copy of each tensor's gradient of its own, in its order, and a phase per
//   tensor sums the copies in task order (B H_kv S copies of each: a table's, not a T x T
//   tensor's, size is what this suits).
// Phases 1, 3 and 4 are BackwardRowPhases.h's, a tile's scores BackwardTile.h's,
// the register tiles and copies BackwardSteps.h's, and where the aux terms go
// BackwardAuxTerms.h's; this file holds the tasks and their buffers.
//
// The keys of a (batch, KV head) are split into S = ceil(8 / (B H_kv)) chunks, so that a
// call with few heads (B H_kv = 1 on two cores) still has 8 tasks, their key blocks shortened
// to ceil(Tk / S) rounded up to 32 keys where that is fewer than keyBlock; S and the blocks depend
// on B, H_kv and Tk only, so a call's gradients are the same at any thread count. dQ's copies take
// S B H d_k Tq floats: at most 8 G d_k Tq for a group of G query heads.
//
//===---------------------------------------------------------------------------===//
#include "attn/IR/AttnOps.h"
#include "attn/Kit/Builders.h"
#include "attn/Kit/Elements.h"
#include "attn/Transforms/AuxCopies.h"
#include "attn/Transforms/BackwardAuxTerms.h"
#include "attn/Transforms/BackwardRowPhases.h"
#include "attn/Transforms/BackwardSteps.h"
#include "attn/Transforms/BackwardTile.h"
#include "attn/Transforms/LowerStateOps.h"
#include "attn/Transforms/ScorePatch.h"
#include "attn/Transforms/ScoreTerms.h"
#include "attn/Transforms/Transforms.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <optional>

using namespace mlir;

namespace attnc::attn {
namespace {

// The fewest tasks of phase 2: the keys are split into chunks until there are as many.
constexpr int64_t kMinTasks = 8;
// A shortened key block's multiple: whole 8 x 8 squares of a bias's patch, whole pairs of
// keys for dot's products, and some keys where Tk is 0.
constexpr int64_t kBlockMultiple = 32;
// The elements of a table's gradient that a task of its sum over the copies forms.
constexpr int64_t kElementsPerSumTask = 256;

// A key block task's stack buffers.
struct KeyBlockBuffers {
  Value accK, accV;      // [keyBlock, d_k], [keyBlock, d_v]: the block's dK and dV
  Value probs, grads;    // [keyBlock, rows]: a query tile's p and g at the block's keys
  Value rowsQ, rowsGrad; // [rows, d_k], [rows, d_v]: the tile's Q and dO rows
  TileBuffers tile;
  // Per aux_grads tensor, for those of aux_grad_direct: [keyBlock, rows], a query tile's terms
  // at the block's keys (null for the others).
  SmallVector<Value> direct;
  // With dot (dQ's sums on vdpbf16ps), bf16 in pairs of keys: [keyBlock / 2, 2 d_k], the
  // block's key rows, and [keyBlock / 2, 2 rows], a query tile's g rounded (else null).
  Value keyPairs, gradPairs;
  // Without dot, the block's K and V transposed: [d_k, keyBlock], [d_v, keyBlock] (else null).
  Value keysT, valuesT;
};

class BackwardLowering {
public:
  BackwardLowering(ImplicitLocOpBuilder& b, BackwardOp op, const BackwardTiles& tiles,
                   const VectorOptions& options)
      : b(b), op(op), tiles(tiles), options(options),
        chunkMajor(op.getAuxGradDirect().has_value() && !op.getAuxGradDirect()->empty()) {}

  void emit();

private:
  int64_t dk() { return op.getQuery().getType().getDimSize(3); }
  int64_t dv() { return op.getValue().getType().getDimSize(3); }
  int64_t keyHeads() { return op.getKey().getType().getDimSize(1); }
  Value stack(ArrayRef<int64_t> shape) {
    return b.create<memref::AllocaOp>(MemRefType::get(shape, b.getF32Type()));
  }
  TileBuffers tileBuffers();
  // TileBuffers::scoreShaped: per aux operand read at every score, a [keyBlock, rows] buffer.
  SmallVector<Value> scoreShapedBuffers();
  KeyBlockBuffers keyBlockBuffers();
  // D's, dQ's copies' and the sink parts' buffers, and S.
  void emitWorkspace();
  void emitChunkTasks();
  // dK and dV of keys [firstKey, firstKey + keyCount) of (batch, kvHead), and the keys'
  // terms of dQ^T added into its copy `slot` of the workspace.
  void emitKeyBlock(ImplicitLocOpBuilder& eb, const KeyBlockBuffers& buffers, Value batch,
                    Value kvHead, Value firstKey, Value keyCount, Value slot, Value task);
  // The keys [begin, end) of the block's terms of dQ^T (g_ij k_j) added into copy `slot`: f32
  // FMAs, or with dot vdpbf16ps on g rounded to bf16, keys in pairs.
  void accumulateQueryGrad(ImplicitLocOpBuilder& ib, const KeyBlockBuffers& buffers, Value slot,
                           Value head, Value row, Value begin, Value end);
  // Zeroes the dQ^T copy `slot` for the heads of KV head `kvHead`'s group.
  void zeroQueryGradCopy(ImplicitLocOpBuilder& pb, Value slot, Value kvHead);
  // Whether dK's or dV's sums over d columns take vdpbf16ps on rows in pairs (dot, bf16 rows
  // of a multiple of 16 columns), P and G rounded to bf16 as FlashAttention rounds them.
  bool pairedSums(int64_t d) { return options.dot && d % 16 == 0; }
  void copyTileRows(ImplicitLocOpBuilder& ib, Value src, Value batch, Value head, Value row,
                    Value count, Value dst) {
    if (cast<MemRefType>(dst.getType()).getElementType().isBF16())
      copyRowsInPairs(ib, src, batch, head, row, count, dst, PairsAlong::Rows);
    else
      copyRows(ib, src, batch, head, row, count, dst);
  }

  ImplicitLocOpBuilder& b;
  BackwardOp op;
  const BackwardTiles tiles;
  const VectorOptions options;
  Value delta;     // [B, H, Tq] f32 workspace: D
  Value queryGrad; // [S B, H, d_k, Tq rounded up to rows] f32 workspace: the chunks' dQ^T
  Value chunks;    // S
  Value sinkParts; // [B, H, Tq / rows] f32 workspace with sinks: each tile's part of d sink
  // Chunk-major with a direct aux gradient (bias): a task per chunk, every (b, g) in it, so
  // that one task owns each key's column of the gradient, whatever it broadcasts over.
  const bool chunkMajor;
  Value taskCount;              // B H_kv S, or S chunk-major: phase 2's tasks
  std::optional<AuxCopies> auxCopies; // the tables' gradients: a copy per phase 2 task
};

TileBuffers BackwardLowering::tileBuffers() {
  if (options.dot) {
    auto paired = [&](int64_t depth) {
      return b.create<memref::AllocaOp>(
          MemRefType::get({depth / 2, 2 * tiles.rows}, b.getBF16Type()));
    };
    return {paired(dk()), paired(dv()), stack({tiles.rows}), stack({tiles.rows}),
            scoreShapedBuffers()};
  }
  return {stack({dk(), tiles.rows}), stack({dv(), tiles.rows}), stack({tiles.rows}),
          stack({tiles.rows}), scoreShapedBuffers()};
}

SmallVector<Value> BackwardLowering::scoreShapedBuffers() {
  return llvm::map_to_vector(ScoreTerms::scoreShapedAux(op), [&](bool shaped) {
    return shaped ? stack({tiles.keyBlock, tiles.rows}) : Value();
  });
}

KeyBlockBuffers BackwardLowering::keyBlockBuffers() {
  const int64_t rows = tiles.rows, block = tiles.keyBlock;
  // Q's and dO's rows in pairs of rows where dK's and dV's sums take vdpbf16ps.
  auto rowsOf = [&](int64_t d) {
    return pairedSums(d) ? Value(b.create<memref::AllocaOp>(
                               MemRefType::get({rows / 2, 2 * d}, b.getBF16Type())))
                         : stack({rows, d});
  };
  KeyBlockBuffers buffers{
      stack({block, dk()}), stack({block, dv()}), stack({block, rows}), stack({block, rows}),
      rowsOf(dk()),         rowsOf(dv()),         tileBuffers(),        {}};
  for (int64_t k = 0; k < static_cast<int64_t>(op.getAuxGrads().size()); ++k)
    buffers.direct.push_back(auxCopies->isTable(k) ? Value() : stack({block, rows}));
  if (options.dot) {
    auto pairs = [&](int64_t width) {
      return b.create<memref::AllocaOp>(
          MemRefType::get({(block + 1) / 2, 2 * width}, b.getBF16Type()));
    };
    buffers.keyPairs = pairs(dk());
    buffers.gradPairs = pairs(rows);
  } else {
    buffers.keysT = stack({dk(), block});
    buffers.valuesT = stack({dv(), block});
  }
  return buffers;
}

void BackwardLowering::emitKeyBlock(ImplicitLocOpBuilder& eb, const KeyBlockBuffers& buffers,
                                    Value batch, Value kvHead, Value firstKey, Value keyCount,
                                    Value slot, Value task) {
  const int64_t rows = tiles.rows, lanes = options.vectorWidth;
  const int64_t group = op.getNumHeads() / keyHeads();
  zeroBuffer(eb, buffers.accK);
  zeroBuffer(eb, buffers.accV);
  if (buffers.keyPairs)
    copyRowsInPairs(eb, op.getKey(), batch, kvHead, firstKey, keyCount, buffers.keyPairs,
                    PairsAlong::Rows);
  if (buffers.keysT) {
    copyRowsTransposed(eb, op.getKey(), batch, kvHead, firstKey, keyCount, buffers.keysT, 1.0);
    copyRowsTransposed(eb, op.getValue(), batch, kvHead, firstKey, keyCount, buffers.valuesT, 1.0);
  }
  Value seqQ = op.getSeqQ(), endKey = eb.create<arith::AddIOp>(firstKey, keyCount);
  Value tileCount = eb.create<arith::CeilDivUIOp>(seqQ, indexConstant(eb, rows));
  Value firstHead = eb.create<arith::MulIOp>(kvHead, indexConstant(eb, group));
  Value lastHead = eb.create<arith::AddIOp>(firstHead, indexConstant(eb, group));
  forRange(eb, firstHead, lastHead, [&](ImplicitLocOpBuilder& hb, Value head) {
    forRange(hb, indexConstant(hb, 0), tileCount, [&](ImplicitLocOpBuilder& tb, Value tile) {
      Value row = tb.create<arith::MulIOp>(tile, indexConstant(tb, rows));
      Value count =
          tb.create<arith::MinSIOp>(indexConstant(tb, rows), tb.create<arith::SubIOp>(seqQ, row));
      BackwardTile queries(tb, op, batch, head, row, count, delta, buffers.tile,
                           {buffers.keysT, buffers.valuesT, firstKey, keyCount}, rows, options);
      const auto [lo, hi] = queries.keptKeys(tb, firstKey, endKey);
      Value first = lo, last = hi;
      Value any = tb.create<arith::CmpIOp>(arith::CmpIPredicate::ult, first, last);
      // With a direct gradient (chunk-major), a tile the masks skip writes its zeros.
      auto kept = tb.create<scf::IfOp>(any, /*withElseRegion=*/chunkMajor);
      if (chunkMajor) {
        ImplicitLocOpBuilder sb(tb.getLoc(), kept.getElseBodyBuilder());
        Value none = indexConstant(sb, 0);
        writeDirectTerms(sb, op, buffers.direct,
                         {Value(), batch, head, row, count, firstKey, keyCount}, none, none);
      }
      {
        ImplicitLocOpBuilder ib(tb.getLoc(), kept.getThenBodyBuilder());
        queries.load(ib);
        copyTileRows(ib, op.getQuery(), batch, head, row, count, buffers.rowsQ);
        copyTileRows(ib, op.getGradOutput(), batch, head, row, count, buffers.rowsGrad);
        forKeyGroups(ib, first, last, options.keyUnroll,
                     [&](ImplicitLocOpBuilder& kb, ArrayRef<Value> keys) {
                       addAuxTerms(kb, op, *auxCopies, task,
                                   queries.at(kb, keys, buffers.probs, buffers.grads),
                                   buffers.direct);
                     });
        Value begin = ib.create<arith::SubIOp>(first, firstKey);
        Value end = ib.create<arith::SubIOp>(last, firstKey);
        accumulateKeyRows(ib, buffers.accV, buffers.probs, buffers.rowsGrad, begin, end, count,
                          lanes);
        accumulateKeyRows(ib, buffers.accK, buffers.grads, buffers.rowsQ, begin, end, count, lanes);
        accumulateQueryGrad(ib, buffers, slot, head, row, begin, end);
        writeDirectTerms(ib, op, buffers.direct,
                         {Value(), batch, head, row, count, firstKey, keyCount}, begin, end);
      }
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

void BackwardLowering::accumulateQueryGrad(ImplicitLocOpBuilder& ib, const KeyBlockBuffers& buffers,
                                           Value slot, Value head, Value row, Value begin,
                                           Value end) {
  if (!buffers.gradPairs) {
    accumulateColumnsOfBlock(ib, queryGrad, {slot, head}, row, buffers.grads,
                             tiles.rows / options.vectorWidth, buffers.keysT, begin, end);
    return;
  }
  packWeightPairs(ib, buffers.grads, begin, end, buffers.gradPairs);
  accumulateColumnsOfBlockInPairs(ib, queryGrad, {slot, head}, row, buffers.gradPairs,
                                  buffers.keyPairs, begin, end);
}

void BackwardLowering::emitChunkTasks() {
  // A task per (batch, KV head, chunk): task = (b H_kv + g) S + s; chunk-major, a task per
  // chunk s looping over every (b, g) in order. The pair's dQ^T copy is s B + b.
  Value pairs = indexConstant(b, keyHeads());
  Value batches = b.create<memref::DimOp>(op.getQuery(), 0);
  auto forall =
      b.create<scf::ForallOp>(ArrayRef<OpFoldResult>{taskCount}, ValueRange{}, std::nullopt);
  b.setInsertionPointToStart(forall.getBody());
  Value task = forall.getInductionVar(0);
  Value chunk = chunkMajor ? task : b.create<arith::RemUIOp>(task, chunks).getResult();
  const KeyBlockBuffers buffers = keyBlockBuffers();
  auxCopies->zero(b, task, indexConstant(b, 0), indexConstant(b, 1));
  // The chunk's key blocks: [s nb / S, (s + 1) nb / S) of the nb blocks of min(keyBlock,
  // ceil(Tk / S) rounded up to 32, at least 32) keys: Tk >= 32 S leaves no chunk without keys
  // (B H_kv = 1 at T 2048 on 512-key blocks would leave 4 of 8 tasks without).
  Value seqK = b.create<memref::DimOp>(op.getKey(), 2);
  Value side = indexConstant(b, kBlockMultiple);
  Value perChunk = b.create<arith::MaxUIOp>(
      b.create<arith::MulIOp>(
          b.create<arith::CeilDivUIOp>(b.create<arith::CeilDivUIOp>(seqK, chunks), side), side),
      side);
  Value block = b.create<arith::MinUIOp>(indexConstant(b, tiles.keyBlock), perChunk);
  Value blocks = b.create<arith::CeilDivUIOp>(seqK, block);
  auto chunkEdge = [&](Value s) {
    return b.create<arith::DivUIOp>(b.create<arith::MulIOp>(s, blocks), chunks);
  };
  Value firstBlock = chunkEdge(chunk);
  Value endBlock = chunkEdge(b.create<arith::AddIOp>(chunk, indexConstant(b, 1)));
  auto pairTask = [&](ImplicitLocOpBuilder& pb, Value batch, Value kvHead) {
    Value slot = pb.create<arith::AddIOp>(pb.create<arith::MulIOp>(chunk, batches), batch);
    zeroQueryGradCopy(pb, slot, kvHead);
    forRange(pb, firstBlock, endBlock, [&](ImplicitLocOpBuilder& kb, Value index) {
      Value firstKey = kb.create<arith::MulIOp>(index, block);
      Value keyCount = kb.create<arith::MinSIOp>(block, kb.create<arith::SubIOp>(seqK, firstKey));
      emitKeyBlock(kb, buffers, batch, kvHead, firstKey, keyCount, slot, task);
    });
  };
  if (chunkMajor) {
    forRange(b, indexConstant(b, 0), batches, [&](ImplicitLocOpBuilder& bb, Value batch) {
      forRange(bb, indexConstant(bb, 0), pairs,
               [&](ImplicitLocOpBuilder& gb, Value kvHead) { pairTask(gb, batch, kvHead); });
    });
  } else {
    Value pair = b.create<arith::DivUIOp>(task, chunks);
    pairTask(b, b.create<arith::DivUIOp>(pair, pairs), b.create<arith::RemUIOp>(pair, pairs));
  }
  b.setInsertionPointAfter(forall);
}

void BackwardLowering::zeroQueryGradCopy(ImplicitLocOpBuilder& pb, Value slot, Value kvHead) {
  // The copy starts at 0 for the group's heads: its rows are this pair's alone.
  const int64_t group = op.getNumHeads() / keyHeads();
  Value firstHead = pb.create<arith::MulIOp>(kvHead, indexConstant(pb, group));
  Value zero = indexConstant(pb, 0);
  forEachIndex(pb, {firstHead, zero, zero},
               {pb.create<arith::AddIOp>(firstHead, indexConstant(pb, group)),
                indexConstant(pb, dk()), pb.create<memref::DimOp>(queryGrad, 3)},
               [&](ImplicitLocOpBuilder& eb, ArrayRef<Value> at) {
                 eb.create<memref::StoreOp>(f32Constant(eb, 0), queryGrad,
                                            ValueRange{slot, at[0], at[1], at[2]});
               });
}

void BackwardLowering::emit() {
  emitWorkspace();
  emitDeltaPhase(b, op, tiles.rows, delta, sinkParts);
  emitChunkTasks();
  emitQueryGradPhase(b, op, tiles.rows, queryGrad, chunks);
  if (op.getSinks())
    emitSinkGradientPhase(b, op, sinkParts);
  auxCopies->sumInOrder(b, kElementsPerSumTask);
  b.create<memref::DeallocOp>(delta);
  b.create<memref::DeallocOp>(queryGrad);
  if (sinkParts)
    b.create<memref::DeallocOp>(sinkParts);
}

void BackwardLowering::emitWorkspace() {
  // Before the block's first phase (a kernel's workspace precedes its phases: RoPE's rotations
  // may run before this op's).
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(firstPhase(*op->getBlock()));
  Value batches = b.create<memref::DimOp>(op.getQuery(), 0);
  Value seqQ = op.getSeqQ();
  Value rows = indexConstant(b, tiles.rows);
  Value paddedRows = b.create<arith::MulIOp>(b.create<arith::CeilDivUIOp>(seqQ, rows), rows);
  const int64_t heads = op.getNumHeads();
  constexpr int64_t dynamic = ShapedType::kDynamic;
  delta = b.create<memref::AllocOp>(MemRefType::get({dynamic, heads, dynamic}, b.getF32Type()),
                                    ValueRange{batches, seqQ});
  Value pairs = b.create<arith::MulIOp>(batches, indexConstant(b, keyHeads()));
  chunks = chunkMajor ? indexConstant(b, kMinTasks)
                      : b.create<arith::CeilDivUIOp>(indexConstant(b, kMinTasks), pairs);
  queryGrad =
      b.create<memref::AllocOp>(MemRefType::get({dynamic, heads, dk(), dynamic}, b.getF32Type()),
                                ValueRange{b.create<arith::MulIOp>(chunks, batches), paddedRows});
  if (op.getSinks())
    sinkParts =
        b.create<memref::AllocOp>(MemRefType::get({dynamic, heads, dynamic}, b.getF32Type()),
                                  ValueRange{batches, b.create<arith::CeilDivUIOp>(seqQ, rows)});
  taskCount = chunkMajor ? chunks : b.create<arith::MulIOp>(pairs, chunks).getResult();
  auxCopies.emplace(op);
  auxCopies->allocate(b, taskCount);
}

// vdpbf16ps: 32 bf16 against 16 f32 lanes, pairs along each head dim.
bool pairedProductsFit(BackwardOp op, const VectorOptions& options) {
  for (Value tensor : {op.getQuery(), op.getKey(), op.getValue(), op.getGradOutput()}) {
    auto type = cast<MemRefType>(tensor.getType());
    if (!type.getElementType().isBF16() || type.getDimSize(3) % 2 != 0)
      return false;
  }
  return options.vectorWidth == 16;
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
  if (options.dot && !pairedProductsFit(op, options))
    return op.emitOpError() << "lower_backward: dot products take bf16 q, k, v and grad_o with "
                               "even head dims, in vectors of 16 lanes";
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  BackwardLowering(b, op, tiles, options).emit();
  rewriter.eraseOp(op);
  return success();
}

} // namespace attnc::attn
