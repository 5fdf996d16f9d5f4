//===- TileKeys.cpp - key blocks over the range the masks keep ----------------===//
#include "attn/Transforms/ScoreTerms.h"
#include "attn/Transforms/Transforms.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;

namespace attnc::attn {

std::pair<Value, Value> keptKeyRange(ImplicitLocOpBuilder& b, ScoreOpInterface op) {
  ValueRange offsets = op.getOffsets(), sizes = op.getSizes();
  auto hasMask = [&](StringRef name) {
    return llvm::any_of(op.getMasks(),
                        [&](Attribute a) { return cast<StringAttr>(a).getValue() == name; });
  };
  auto constant = [&](int64_t v) -> Value { return b.create<arith::ConstantIndexOp>(v); };
  Value one = constant(1);
  Value lo = offsets[3];
  Value hi = b.create<arith::AddIOp>(offsets[3], sizes[3]);

  // Query row i sits at key position i + off.
  Value firstPos = b.create<arith::AddIOp>(offsets[2], ScoreTerms::positionOffset(b, op));
  Value lastPos = b.create<arith::SubIOp>(b.create<arith::AddIOp>(firstPos, sizes[2]), one);
  // causal keeps j <= pos; window keeps pos - left <= j <= pos + right; padding j < len[b].
  if (hasMask("causal"))
    hi = b.create<arith::MinSIOp>(hi, b.create<arith::AddIOp>(lastPos, one));
  if (hasMask("window")) {
    lo = b.create<arith::MaxSIOp>(
        lo, b.create<arith::SubIOp>(firstPos, constant(*op.getWindowLeft())));
    Value right = constant(op.getWindowRight().value_or(0) + 1);
    hi = b.create<arith::MinSIOp>(hi, b.create<arith::AddIOp>(lastPos, right));
  }
  if (Value lengths = op.getLengths()) {
    Value length = b.create<memref::LoadOp>(lengths, offsets[0]);
    hi = b.create<arith::MinSIOp>(hi, b.create<arith::IndexCastOp>(b.getIndexType(), length));
  }
  // An empty range sits inside the domain, j0 <= lo <= hi <= j0 + nj (rows placed before every
  // key by a bottom-right alignment with Tq > Tk put lastPos below j0).
  hi = b.create<arith::MaxSIOp>(hi, offsets[3]);
  lo = b.create<arith::MinSIOp>(lo, hi);
  return {lo, hi};
}

FailureOr<TiledKeys> tileKeys(RewriterBase& rewriter, OnlineUpdateOp update, int64_t block) {
  if (block <= 0)
    return update.emitOpError() << "tile_keys: a key block must hold at least one key";
  ValueRange offsets = update.getOffsets(), sizes = update.getSizes();
  if (getConstantIntValue(sizes[0]) != 1 || getConstantIntValue(sizes[1]) != 1)
    return update.emitOpError() << "tile_keys needs an update of one batch and head "
                                   "(tile_queries first)";

  rewriter.setInsertionPoint(update);
  ImplicitLocOpBuilder b(update.getLoc(), rewriter);
  auto constant = [&](int64_t v) -> Value { return b.create<arith::ConstantIndexOp>(v); };
  auto [lo, hi] = keptKeyRange(b, update);

  auto loop = b.create<scf::ForOp>(lo, hi, constant(block));
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
