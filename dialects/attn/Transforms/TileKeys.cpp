//===- TileKeys.cpp - key blocks over the range the mask keeps ----------------===//
#include "attn/Transforms/KeyRange.h"
#include "attn/Transforms/Transforms.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;

namespace attnc::attn {

FailureOr<TiledKeys> tileKeys(RewriterBase& rewriter, OnlineUpdateOp update, int64_t block) {
  if (block <= 0)
    return update.emitOpError() << "tile_keys: a key block must hold at least one key";
  ValueRange offsets = update.getOffsets(), sizes = update.getSizes();
  // One batch entry and one head, or a GQA group's heads (tile_queries pack_heads): the key
  // range covers what any head of the task can keep (KeyRange.h).
  if (getConstantIntValue(sizes[0]) != 1 || !getConstantIntValue(sizes[1]))
    return update.emitOpError() << "tile_keys needs an update of one batch entry and a static "
                                   "number of heads (tile_queries first)";

  rewriter.setInsertionPoint(update);
  ImplicitLocOpBuilder b(update.getLoc(), rewriter);
  auto constant = [&](int64_t v) -> Value { return b.create<arith::ConstantIndexOp>(v); };
  auto [lo, hi] = keptKeyRange(b, update);
  // Blocks start at multiples of the block from the domain's first key, whatever lo is.
  Value first = b.create<arith::SubIOp>(
      lo, b.create<arith::RemUIOp>(b.create<arith::SubIOp>(lo, offsets[3]), constant(block)));

  auto loop = b.create<scf::ForOp>(first, hi, constant(block));
  b.setInsertionPointToStart(loop.getBody());
  Value key = loop.getInductionVar();
  Value count = b.create<arith::MinSIOp>(constant(block), b.create<arith::SubIOp>(hi, key));
  auto tiled = cast<OnlineUpdateOp>(rewriter.clone(*update));
  rewriter.moveOpBefore(tiled, b.getInsertionBlock(), b.getInsertionPoint());
  rewriter.modifyOpInPlace(tiled, [&] {
    tiled.getOffsetsMutable().assign({offsets[0], offsets[1], offsets[2], key});
    tiled.getSizesMutable().assign({sizes[0], sizes[1], sizes[2], count});
    tiled.setMaxKeys(block);
  });
  rewriter.eraseOp(update);
  return TiledKeys{loop, tiled};
}

} // namespace attnc::attn
