//===- TileQueries.cpp - query tiles and packed queries -----------------------===//
#include "attn/Transforms/Transforms.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;

namespace attnc::attn {
Block* taskStackBlock(Operation* op) {
  if (auto forall = op->getParentOfType<scf::ForallOp>())
    return forall.getBody();
  if (auto function = op->getParentOfType<FunctionOpInterface>())
    return &function.getFunctionBody().front();
  return op->getBlock();
}

QueryTiles forEachQueryTile(ImplicitLocOpBuilder& b, ScoreOpInterface op, int64_t rows,
                            int64_t headsPerTask) {
  ValueRange offsets = op.getOffsets(), sizes = op.getSizes();
  // One task per (batch, group of heads, tile of `rows` query rows): task = (b * groups + h)
  // * tiles + tile.
  Value tileRows = b.create<arith::ConstantIndexOp>(rows);
  Value perTask = b.create<arith::ConstantIndexOp>(headsPerTask);
  Value groups = b.createOrFold<arith::DivUIOp>(sizes[1], perTask);
  Value tiles = b.create<arith::CeilDivUIOp>(sizes[2], tileRows);
  Value tasks = b.create<arith::MulIOp>(b.create<arith::MulIOp>(sizes[0], groups), tiles);
  auto forall = b.create<scf::ForallOp>(ArrayRef<OpFoldResult>{tasks}, ValueRange{}, std::nullopt);

  b.setInsertionPointToStart(forall.getBody());
  Value task = forall.getInductionVar(0);
  Value tile = b.create<arith::RemUIOp>(task, tiles);
  Value batchGroup = b.create<arith::DivUIOp>(task, tiles);
  Value head = b.create<arith::AddIOp>(
      offsets[1],
      b.createOrFold<arith::MulIOp>(b.create<arith::RemUIOp>(batchGroup, groups), perTask));
  Value batch = b.create<arith::AddIOp>(offsets[0], b.create<arith::DivUIOp>(batchGroup, groups));
  Value row = b.create<arith::AddIOp>(offsets[2], b.create<arith::MulIOp>(tile, tileRows));
  Value end = b.create<arith::AddIOp>(offsets[2], sizes[2]);
  Value count = b.create<arith::MinSIOp>(tileRows, b.create<arith::SubIOp>(end, row));
  return {forall, batch, head, row, count};
}

FailureOr<StateOps> findStateOps(OnlineUpdateOp update, StringRef step) {
  StateOps ops;
  for (Value state : {update.getAcc(), update.getMax(), update.getSum()}) {
    auto alloc = state.getDefiningOp<memref::AllocOp>();
    if (!alloc)
      return update.emitOpError() << step << " needs state buffers made by memref.alloc";
    ops.allocs.push_back(alloc);
    for (Operation* user : alloc->getUsers()) {
      if (auto init = dyn_cast<OnlineInitOp>(user))
        ops.init = init;
      else if (auto finalize = dyn_cast<OnlineFinalizeOp>(user))
        ops.finalize = finalize;
      else if (isa<memref::DeallocOp>(user))
        ops.deallocs.push_back(user);
      else if (user != update.getOperation())
        return update.emitOpError() << step << ": the state is also used by " << user->getName();
    }
  }
  if (!ops.init || !ops.finalize || ops.init->getBlock() != update->getBlock() ||
      ops.finalize->getBlock() != update->getBlock())
    return update.emitOpError() << step
                                << " needs the state's online_init and online_finalize beside the "
                                   "update";
  for (unsigned d = 0; d < 3; ++d)
    if (ops.finalize.getOffsets()[d] != update.getOffsets()[d] ||
        ops.finalize.getSizes()[d] != update.getSizes()[d])
      return update.emitOpError() << step << ": online_finalize covers another domain";
  return ops;
}

void eraseWithStateOps(RewriterBase& rewriter, OnlineUpdateOp update, const StateOps& state) {
  for (Operation* dead : state.deallocs)
    rewriter.eraseOp(dead);
  rewriter.eraseOp(state.finalize);
  rewriter.eraseOp(update);
  rewriter.eraseOp(state.init);
  for (memref::AllocOp alloc : state.allocs)
    rewriter.eraseOp(alloc);
}

FailureOr<TiledQueries> tileQueries(RewriterBase& rewriter, OnlineUpdateOp update, int64_t rows,
                                    bool packHeads) {
  if (rows <= 0)
    return update.emitOpError() << "tile_queries: the tile must have at least one row";
  const int64_t kvHeads = update.getKey().getType().getDimSize(1);
  const int64_t heads = static_cast<int64_t>(update.getNumHeads());
  const int64_t group = packHeads && !ShapedType::isDynamic(kvHeads) ? heads / kvHeads : 1;
  if (packHeads) {
    if (ShapedType::isDynamic(kvHeads) || getConstantIntValue(update.getOffsets()[1]) != 0 ||
        getConstantIntValue(update.getSizes()[1]) != heads)
      return update.emitOpError() << "tile_queries pack_heads needs static KV heads and an "
                                     "update over every head";
    if (group > rows)
      return update.emitOpError() << "tile_queries pack_heads: a tile of " << rows
                                  << " rows cannot hold a row of each of the group's " << group
                                  << " heads";
  }
  FailureOr<StateOps> state = findStateOps(update, "tile_queries");
  if (failed(state))
    return failure();
  const int64_t dv = update.getValue().getType().getDimSize(3);
  ValueRange offsets = update.getOffsets(), sizes = update.getSizes();

  rewriter.setInsertionPoint(state->finalize);
  ImplicitLocOpBuilder b(update.getLoc(), rewriter);
  auto [forall, batch, head, row, count] = forEachQueryTile(b, update, rows / group, group);
  Value one = b.create<arith::ConstantIndexOp>(1);
  Value headsPerTask = b.create<arith::ConstantIndexOp>(group);

  auto f32 = b.getF32Type();
  Value acc = b.create<memref::AllocaOp>(MemRefType::get({1, 1, dv, rows}, f32));
  Value max = b.create<memref::AllocaOp>(MemRefType::get({1, 1, rows}, f32));
  Value sum = b.create<memref::AllocaOp>(MemRefType::get({1, 1, rows}, f32));
  b.create<OnlineInitOp>(acc, max, sum);

  auto tiled = cast<OnlineUpdateOp>(rewriter.clone(*update));
  rewriter.moveOpBefore(tiled, b.getInsertionBlock(), b.getInsertionPoint());
  tiled.getAccMutable().assign(acc);
  tiled.getMaxMutable().assign(max);
  tiled.getSumMutable().assign(sum);
  tiled.getOffsetsMutable().assign({batch, head, row, offsets[3]});
  tiled.getSizesMutable().assign({one, headsPerTask, count, sizes[3]});

  OnlineFinalizeOp finalize = state->finalize;
  b.create<OnlineFinalizeOp>(acc, max, sum, finalize.getOutput(), finalize.getLse(),
                             finalize.getSinks(), ValueRange{batch, head, row},
                             ValueRange{one, headsPerTask, count});

  eraseWithStateOps(rewriter, update, *state);
  return TiledQueries{forall, tiled};
}

FailureOr<PackQueryOp> packQuery(RewriterBase& rewriter, OnlineUpdateOp update) {
  if (update.hasPackedQuery())
    return update.emitOpError() << "pack_query: the query is already packed";
  // lower_to_mma reads a paged or quantized cache itself; the vector lowerings, which read
  // packed queries, do not.
  if (update.getBlockTable() || update.getKeyScale())
    return update.emitOpError() << "pack_query: a paged or quantized cache needs "
                                   "transform.attn.gather_cache first";
  ValueRange offsets = update.getOffsets(), sizes = update.getSizes();
  if (getConstantIntValue(sizes[0]) != 1 || getConstantIntValue(sizes[1]) != 1)
    return update.emitOpError() << "pack_query needs an update of one batch and head "
                                   "(tile_queries first)";
  const int64_t rows = update.getAcc().getType().getDimSize(3);
  if (ShapedType::isDynamic(rows))
    return update.emitOpError() << "pack_query needs a static number of rows in the state";
  const int64_t dk = update.getKey().getType().getDimSize(3);

  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToStart(taskStackBlock(update));
  Value packed = rewriter.create<memref::AllocaOp>(
      update.getLoc(), MemRefType::get({dk, rows}, rewriter.getF32Type()));
  rewriter.setInsertionPoint(update);
  auto pack =
      rewriter.create<PackQueryOp>(update.getLoc(), update.getQuery(), offsets[0], offsets[1],
                                   offsets[2], sizes[2], packed, packingScale(update));
  rewriter.modifyOpInPlace(update, [&] { update.getQueryMutable().assign(packed); });
  return pack;
}

FloatAttr packingScale(ScoreOpInterface op) {
  return Builder(op->getContext())
      .getF64FloatAttr(op.getScoreWeights() ? 1.0 : op.getScale().convertToDouble());
}

} // namespace attnc::attn
