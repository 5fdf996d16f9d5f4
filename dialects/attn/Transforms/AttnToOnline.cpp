//===- AttnToOnline.cpp - attn.attention to the online-softmax form -----------===//
#include "attn/IR/AttnOps.h"
#include "attn/Kit/Builders.h"
#include "attn/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace attnc::attn {
#define GEN_PASS_DEF_ATTNTOONLINE
#include "attn/Transforms/Passes.h.inc"
} // namespace attnc::attn

using namespace mlir;
using namespace attnc::attn;

namespace {

// The buffer a tensor was read from (bufferization.to_tensor), or null.
Value bufferOf(Value tensor) {
  if (!tensor)
    return {};
  auto read = tensor.getDefiningOp<bufferization::ToTensorOp>();
  return read ? read.getMemref() : Value();
}

// The single materialize_in_destination storing `result`, or null.
bufferization::MaterializeInDestinationOp storeOf(Value result) {
  if (!result || !result.hasOneUse())
    return {};
  return dyn_cast<bufferization::MaterializeInDestinationOp>(*result.getUsers().begin());
}

// The tensors' stores: o's, and lse's and the weights' where the op has them.
struct Stores {
  bufferization::MaterializeInDestinationOp output, lse, weights;
};

// Whether every operand is read with bufferization.to_tensor and every result stored once.
bool readsAndStoresBuffers(AttentionOp op, Stores stores) {
  return bufferOf(op.getQuery()) && bufferOf(op.getKey()) && bufferOf(op.getValue()) &&
         stores.output && (!op.getLse() || stores.lse) && (!op.getWeights() || stores.weights) &&
         llvm::all_of(op.getAux(), [](Value aux) { return static_cast<bool>(bufferOf(aux)); }) &&
         (!op.getSinks() || bufferOf(op.getSinks())) &&
         (!op.getBlockTable() || (bufferOf(op.getBlockTable()) && bufferOf(op.getSeqLens()))) &&
         (!op.getKeyScale() || (bufferOf(op.getKeyScale()) && bufferOf(op.getValueScale())));
}

// RoPE rotates the query rows at their aligned positions and the keys at theirs, each once per
// call, into buffers of their type that the update reads instead (both allocated before either
// rotation: a kernel's workspace precedes its phases), added to heapBuffers. A KV cache holds
// its keys rotated already; its queries sit at the end of each sequence's seq_lens[b] keys.
void emitRope(ImplicitLocOpBuilder& b, AttentionOp op, StringRef style, Value& q, Value& k,
              Value zero, Value seqQ, Value seqK, SmallVector<Value>& heapBuffers) {
  auto qType = cast<MemRefType>(q.getType());
  const int64_t dims = op.getRopeDims().value_or(qType.getDimSize(3));
  auto bufferLike = [&](Value rows) {
    OpBuilder::InsertionGuard atWorkspace(b);
    b.setInsertionPoint(firstPhase(*op->getBlock()));
    auto type = cast<MemRefType>(rows.getType());
    SmallVector<Value> dynamicSizes;
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (type.isDynamicDim(d))
        dynamicSizes.push_back(b.create<memref::DimOp>(rows, d));
    heapBuffers.push_back(b.create<memref::AllocOp>(
        MemRefType::get(type.getShape(), type.getElementType()), dynamicSizes));
    return heapBuffers.back();
  };
  Value ends = op.getQueryEnds() ? bufferOf(op.getQueryEnds()) : Value();
  Value rotatedQ = bufferLike(q), rotatedK = ends ? Value() : bufferLike(k);
  auto rotate = [&](Value rows, Value rotated, Value offset, Value ends) {
    b.create<RopeOp>(rows, rotated, offset, ends, b.getStringAttr(style), op.getRopeThetaAttr(),
                     b.getI64IntegerAttr(dims), /*transposed=*/UnitAttr());
  };
  if (ends) {
    rotate(q, rotatedQ, b.create<arith::SubIOp>(zero, seqQ), ends);
  } else {
    Value queryOffset = op.getCausalAlign() == "bottom_right"
                            ? b.create<arith::SubIOp>(seqK, seqQ).getResult()
                            : zero;
    rotate(q, rotatedQ, queryOffset, Value());
    rotate(k, rotatedK, zero, Value());
    k = rotatedK;
  }
  q = rotatedQ;
}

// The tensors are gone: erase the stores, the op and the reads nothing else uses.
void eraseTensors(IRRewriter& rewriter, AttentionOp op, Stores stores) {
  SmallVector<Operation*> reads;
  for (Value operand : op->getOperands())
    reads.push_back(operand.getDefiningOp());
  for (Operation* store :
       {stores.output.getOperation(), stores.lse.getOperation(), stores.weights.getOperation()})
    if (store)
      rewriter.eraseOp(store);
  rewriter.eraseOp(op);
  for (Operation* read : reads)
    if (read->use_empty())
      rewriter.eraseOp(read);
}

LogicalResult decompose(AttentionOp op) {
  Stores stores{storeOf(op.getOutput()), storeOf(op.getLse()), storeOf(op.getWeights())};
  if (!readsAndStoresBuffers(op, stores))
    return op.emitOpError() << "attn-to-online needs operands read with bufferization.to_tensor "
                               "and results stored with bufferization.materialize_in_destination";
  Value q = bufferOf(op.getQuery()), k = bufferOf(op.getKey()), v = bufferOf(op.getValue());
  IRRewriter rewriter(op);
  // The sizes and the state's heap buffers come before the kernel's first phase (a variant's
  // operand products may precede the attention), the ops in the attention's place.
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  b.setInsertionPoint(firstPhase(*op->getBlock()));
  auto qType = cast<MemRefType>(q.getType());
  const int64_t heads = qType.getDimSize(1);
  const int64_t dv = cast<MemRefType>(v.getType()).getDimSize(3);
  Value zero = b.create<arith::ConstantIndexOp>(0);
  Value batch = b.create<memref::DimOp>(q, 0);
  Value headsValue = b.create<arith::ConstantIndexOp>(heads);
  Value seqQ = b.create<memref::DimOp>(q, 2);
  // A paged cache's keys [pages, H_kv, page_size, d]: Tk is the block table's width in pages.
  Value blockTable = op.getBlockTable() ? bufferOf(op.getBlockTable()) : Value();
  Value seqLens = op.getSeqLens() ? bufferOf(op.getSeqLens()) : Value();
  Value keyScale = op.getKeyScale() ? bufferOf(op.getKeyScale()) : Value();
  Value valueScale = op.getValueScale() ? bufferOf(op.getValueScale()) : Value();
  Value seqK = b.create<memref::DimOp>(k, 2);
  if (blockTable)
    seqK = b.create<arith::MulIOp>(b.create<memref::DimOp>(blockTable, 1), seqK);

  // State over the whole domain, rows innermost: acc [B, H, d_v, Tq], max and sum [B, H, Tq].
  const int64_t dyn = ShapedType::kDynamic;
  auto accType = MemRefType::get({dyn, heads, dv, dyn}, b.getF32Type());
  auto rowType = MemRefType::get({dyn, heads, dyn}, b.getF32Type());
  Value acc = b.create<memref::AllocOp>(accType, ValueRange{batch, seqQ});
  Value max = b.create<memref::AllocOp>(rowType, ValueRange{batch, seqQ});
  Value sum = b.create<memref::AllocOp>(rowType, ValueRange{batch, seqQ});
  // Heap buffers, freed after the finalize: the state (tiling moves it onto the stack), and
  // workspace beside the kernel's phases: RoPE's rotated query and keys.
  SmallVector<Value> heapBuffers = {acc, max, sum};
  b.setInsertionPoint(op);
  Value lse = stores.lse ? stores.lse.getDest() : Value();
  if (std::optional<StringRef> style = op.getRope())
    emitRope(b, op, *style, q, k, zero, seqQ, seqK, heapBuffers);
  b.create<OnlineInitOp>(acc, max, sum);
  SmallVector<Value> aux = llvm::map_to_vector(op.getAux(), bufferOf);
  Value scoreWeights = op.getScoreWeights() ? bufferOf(op.getScoreWeights()) : Value();
  auto update = b.create<OnlineUpdateOp>(
      q, k, v, aux, blockTable, seqLens, keyScale, valueScale, scoreWeights, acc, max, sum,
      ValueRange{zero, zero, zero, zero}, ValueRange{batch, headsValue, seqQ, seqK}, seqQ,
      b.getI64IntegerAttr(heads), IntegerAttr(), op.getScaleAttr(), op.getCausalAlignAttr());
  Value sinks = op.getSinks() ? bufferOf(op.getSinks()) : Value();
  b.create<OnlineFinalizeOp>(acc, max, sum, stores.output.getDest(), lse, sinks,
                             ValueRange{zero, zero, zero}, ValueRange{batch, headsValue, seqQ});
  // The weights, a second pass over the keys that forms each row's max and sum itself. The
  // expressions are copied (to the weights) or moved (to the update) whole: their blocks use
  // only their arguments.
  if (stores.weights) {
    auto weights = b.create<WeightsOp>(
        q, k, aux, blockTable, seqLens, keyScale, sinks, scoreWeights, stores.weights.getDest(),
        ValueRange{zero, zero, zero, zero}, ValueRange{batch, headsValue, seqQ, seqK}, seqQ,
        b.getI64IntegerAttr(heads), op.getScaleAttr(), op.getCausalAlignAttr());
    IRMapping none;
    op.getScoreMod().cloneInto(&weights.getScoreMod(), none);
    op.getMaskMod().cloneInto(&weights.getMaskMod(), none);
  }
  update.getScoreMod().takeBody(op.getScoreMod());
  update.getMaskMod().takeBody(op.getMaskMod());
  update.getDropout().takeBody(op.getDropout());
  for (Value buffer : heapBuffers)
    b.create<memref::DeallocOp>(buffer);

  eraseTensors(rewriter, op, stores);
  return success();
}

struct AttnToOnlinePass : attnc::attn::impl::AttnToOnlineBase<AttnToOnlinePass> {
  void runOnOperation() override {
    SmallVector<AttentionOp> ops;
    getOperation().walk([&](AttentionOp op) { ops.push_back(op); });
    for (AttentionOp op : ops)
      if (failed(decompose(op)))
        return signalPassFailure();
  }
};

} // namespace
