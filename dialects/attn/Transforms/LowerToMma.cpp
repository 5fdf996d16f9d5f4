//===- LowerToMma.cpp - query tiles as tensor-core flash attention on a GPU --===//
//
// The entry of lower_to_mma: matches a task of the online form, checks that tensor cores take
// it, records what the host must check, and replaces the task loop by the launches of its
// kernels (MmaLowering.h): the one-pass kernel (MmaOnePass.cpp), or when key splits are
// allowed a run-time choice between it and the split-key kernels (MmaSplitKey.cpp).
//
//===---------------------------------------------------------------------------===//
#include "Semantics/OnlineSoftmax.h"
#include "attn/Kit/Builders.h"
#include "attn/Transforms/MmaLowering.h"
#include "bundle/MmaContract.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

using namespace mlir;

namespace attnc::attn {
namespace {

// tile_keys' loop over one key block (a static Tk of at most the block: Linformer's proj_len
// keys) is folded away by the canonicalizer after tiling; put it back around the update, one
// trip from its first key, so the kernels see the task's usual shape.
void restoreKeyLoop(RewriterBase& rewriter, OnlineUpdateOp update) {
  if (!update.getMaxKeys())
    return; // not tiled: matchTask reports it
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(update);
  ImplicitLocOpBuilder b(update.getLoc(), rewriter);
  Value first = update.getOffsets()[3];
  Value end = b.create<arith::AddIOp>(first, update.getSizes()[3]);
  auto loop = b.create<scf::ForOp>(
      first, end, b.create<arith::ConstantIndexOp>(static_cast<int64_t>(*update.getMaxKeys())));
  rewriter.moveOpBefore(update, loop.getBody()->getTerminator());
  rewriter.modifyOpInPlace(
      update, [&] { update.getOffsetsMutable().slice(3, 1).assign(loop.getInductionVar()); });
}

FailureOr<TaskOps> matchTask(scf::ForallOp tasks) {
  TaskOps ops;
  if (tasks.getRank() != 1 || !tasks.getOutputs().empty())
    return tasks.emitOpError() << "lower_to_mma needs a 1-d scf.forall of tasks (tile_queries)";
  for (Operation& op : tasks.getBody()->without_terminator()) {
    if (auto init = dyn_cast<OnlineInitOp>(op))
      ops.init = init;
    else if (auto finalize = dyn_cast<OnlineFinalizeOp>(op))
      ops.finalize = finalize;
    else if (auto loop = dyn_cast<scf::ForOp>(op))
      loop.walk([&](OnlineUpdateOp update) {
        ops.keys = loop;
        ops.update = update;
      });
    else if (isa<PackQueryOp>(op))
      return op.emitOpError() << "lower_to_mma reads the query itself: do not pack it";
  }
  if (!ops.init || !ops.finalize || !ops.update || ops.update->getParentOp() != ops.keys)
    return tasks.emitOpError() << "lower_to_mma needs a task of online_init, an scf.for of "
                                  "online_update (tile_keys) and online_finalize";
  return ops;
}

// The function argument a tensor comes from (through bshd's memref.transpose), or -1.
int64_t argumentIndex(Value memref) {
  while (auto transpose = memref.getDefiningOp<memref::TransposeOp>())
    memref = transpose.getIn();
  auto argument = dyn_cast<BlockArgument>(memref);
  return argument && isa<func::FuncOp>(argument.getOwner()->getParentOp()) ? argument.getArgNumber()
                                                                           : -1;
}

MmaShape shapeOf(OnlineUpdateOp update) {
  return {update.getQuery().getType().getElementType(),
          update.getKey().getType().getDimSize(3),
          update.getValue().getType().getDimSize(3),
          update.getAcc().getType().getDimSize(3),
          static_cast<int64_t>(update.getMaxKeys().value_or(0)),
          getConstantIntValue(update.getSizes()[1]).value_or(0)};
}

} // namespace

MmaLowering::MmaLowering(RewriterBase& rewriter, scf::ForallOp tasks, const TaskOps& ops,
                         const MmaOptions& options)
    : MmaFragments(rewriter, ops.update, shapeOf(ops.update)), rewriter(rewriter), tasks(tasks),
      ops(ops), update(ops.update), options(options),
      softmax(Exponential::Base2,
              static_cast<float>(attnc::softmax::probabilityShiftFor(element.isF16()))) {}

LogicalResult MmaLowering::check() {
  auto fail = [&]() { return update.emitOpError() << "lower_to_mma: "; };
  if (!element.isF16() && !element.isBF16())
    return fail() << "tensor cores take f16 or bf16 storage, not " << element;
  if (update.getScoreWeights())
    return fail() << "an additive score (score_weights) has no Q K^T product for tensor cores";
  for (Value rows : {update.getKey(), update.getValue()}) {
    Type stored = cast<MemRefType>(rows.getType()).getElementType();
    if (stored != element && !(update.getKeyScale() && (stored.isInteger(8) ||
                                                         isa<Float8E4M3FNType>(stored))))
      return fail() << "k and v must have q's element type " << element << ", or be quantized "
                       "rows (int8, fp8 E4M3) with their scales, not " << stored;
  }
  if (dk % 16 != 0 || dv % 16 != 0)
    return fail() << "d_k = " << dk << " and d_v = " << dv << " must be multiples of 16";
  if (ShapedType::isDynamic(rows) || rows % 16 != 0 || warps > 32)
    return fail() << "the query tile (" << rows << " rows) must be 16 rows per warp, at most "
                  << "32 warps";
  if (block <= 0 || block % 16 != 0)
    return fail() << "the key block (max_keys " << block << ") must be a multiple of 16";
  const int64_t bytes = mmaSharedBytes(block, dk, dv, element.getIntOrFloatBitWidth() / 8,
                                       static_cast<bool>(update.getKeyScale()));
  if (bytes > kMmaSharedLimit)
    return fail() << "K and V tiles of " << block << " keys need " << bytes
                  << " bytes of shared memory; at most " << kMmaSharedLimit << " (use a smaller "
                  << "key block)";
  if (update.hasPackedQuery())
    return fail() << "the query must not be packed";
  if (headsPerTask <= 0 || headsPerTask > rows)
    return fail() << "a task's heads must be static and at most its " << rows << " rows";
  return success();
}

void MmaLowering::recordAlignedArgs(ImplicitLocOpBuilder& b) {
  recordAlignedArguments(
      b, tasks->getParentOfType<ModuleOp>(), kMmaAlignedArgsSymbol,
      {update.getQuery(), update.getKey(), update.getValue(), ops.finalize.getOutput()});
}

// The host check of MmaContract.h: the function arguments that cp.async and the paired loads
// and stores read, as a bit mask in a public constant the bundle's entry reads. A kernel of
// two lowerings (decode tiles and prefill tiles) checks the arguments of both.
void recordAlignedArguments(ImplicitLocOpBuilder& b, ModuleOp module, StringRef symbol,
                            ValueRange tensors) {
  int32_t mask = 0;
  for (Value v : tensors)
    if (int64_t index = argumentIndex(v); index >= 0)
      mask |= 1 << index;
  auto tensorType = RankedTensorType::get({}, b.getI32Type());
  if (auto recorded = module.lookupSymbol<memref::GlobalOp>(symbol)) {
    mask |= cast<DenseElementsAttr>(*recorded.getInitialValue()).getSplatValue<int32_t>();
    recorded.setInitialValueAttr(DenseElementsAttr::get(tensorType, mask));
    return;
  }
  OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
  auto type = MemRefType::get({}, b.getI32Type());
  mb.create<memref::GlobalOp>(b.getLoc(), symbol, mb.getStringAttr("public"), type,
                              DenseElementsAttr::get(tensorType, mask),
                              /*constant=*/true, IntegerAttr());
}

LogicalResult MmaLowering::emit() {
  if (failed(check()))
    return failure();
  ImplicitLocOpBuilder b(tasks.getLoc(), rewriter);
  b.setInsertionPoint(tasks);
  recordAlignedArgs(b);
  // Views with a static unit innermost stride, which cp.async and vector loads need; the
  // bundle's entry checks at run time that the tensors have one (MmaContract.h).
  query = unitInnerStrideView(b, update.getQuery()).first;
  key = unitInnerStrideView(b, update.getKey()).first;
  value = unitInnerStrideView(b, update.getValue()).first;
  output = unitInnerStrideView(b, ops.finalize.getOutput()).first;
  Value count = getValueOrCreateConstantIndexOp(b, b.getLoc(), tasks.getMixedUpperBound()[0]);
  if (options.maxKeySplits > 1)
    emitSplitOrWhole(b, count);
  else
    emitLaunch(b, Phase::Whole, count, c(b, 1));
  tasks->getParentOfType<func::FuncOp>()->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  rewriter.eraseOp(tasks);
  return success();
}

LogicalResult lowerTasksToMma(RewriterBase& rewriter, scf::ForallOp tasks,
                              const MmaOptions& options) {
  // A phase with no update is not the attention's (a paged cache's gather): left as it is.
  if (!tasks.getBody()->walk([](OnlineUpdateOp) { return WalkResult::interrupt(); })
           .wasInterrupted())
    return success();
  for (auto update : llvm::make_early_inc_range(tasks.getBody()->getOps<OnlineUpdateOp>()))
    restoreKeyLoop(rewriter, update);
  FailureOr<TaskOps> ops = matchTask(tasks);
  if (failed(ops))
    return failure();
  return MmaLowering(rewriter, tasks, *ops, options).emit();
}

} // namespace attnc::attn
