//===- OutlineTasks.cpp - a kernel's parallel loop as task functions ----------===//
#include "attn/Transforms/Passes.h"
#include "mlir/IR/IRMapping.h"

namespace attnc::attn {
#define GEN_PASS_DEF_ATTNOUTLINETASKS
#include "attn/Transforms/Passes.h.inc"
} // namespace attnc::attn

using namespace mlir;
using namespace attnc::attn;

namespace {

// The kernel's one-dimensional scf.forall, preceded only by side-effect-free ops.
FailureOr<scf::ForallOp> findTaskLoop(func::FuncOp kernel) {
  scf::ForallOp loop;
  for (Operation& op : kernel.getBody().front()) {
    if (auto forall = dyn_cast<scf::ForallOp>(op)) {
      if (loop || forall.getRank() != 1 || !forall.getOutputs().empty())
        return kernel.emitOpError() << "attn-outline-tasks needs exactly one 1-d scf.forall "
                                       "without outputs";
      loop = forall;
    } else if (isa<func::ReturnOp>(op)) {
      continue;
    } else if (loop || !isMemoryEffectFree(&op)) {
      return kernel.emitOpError() << "attn-outline-tasks: only index arithmetic may come before "
                                     "the task loop and nothing after it, found "
                                  << op.getName();
    }
  }
  if (!loop)
    return kernel.emitOpError() << "attn-outline-tasks: the kernel has no scf.forall";
  return loop;
}

// A new function `name` with `leading` index arguments before the kernel's, its body the
// kernel's ops before the loop; `mapping` maps the kernel's values to the new function's.
func::FuncOp startTaskFunction(OpBuilder& b, func::FuncOp kernel, scf::ForallOp loop,
                               StringRef name, unsigned leading, TypeRange results,
                               IRMapping& mapping) {
  SmallVector<Type> inputs(leading, b.getIndexType());
  llvm::append_range(inputs, kernel.getArgumentTypes());
  auto fn = b.create<func::FuncOp>(kernel.getLoc(), name, b.getFunctionType(inputs, results));
  fn->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  Block* entry = fn.addEntryBlock();
  for (auto [from, to] :
       llvm::zip(kernel.getArguments(), entry->getArguments().drop_front(leading)))
    mapping.map(from, to);
  OpBuilder body = OpBuilder::atBlockEnd(entry);
  for (Operation& op : kernel.getBody().front()) {
    if (&op == loop.getOperation())
      break;
    body.clone(op, mapping);
  }
  return fn;
}

LogicalResult outline(func::FuncOp kernel, int64_t stackBytes) {
  FailureOr<scf::ForallOp> found = findTaskLoop(kernel);
  if (failed(found))
    return failure();
  scf::ForallOp loop = *found;
  OpBuilder b(kernel);
  std::string name = kernel.getSymName().str();

  // @<name>_tasks(args) -> index: the number of tasks.
  IRMapping countMap;
  func::FuncOp count =
      startTaskFunction(b, kernel, loop, name + "_tasks", 0, {b.getIndexType()}, countMap);
  OpBuilder cb = OpBuilder::atBlockEnd(&count.getBody().front());
  Value upper = getValueOrCreateConstantIndexOp(cb, loop.getLoc(), loop.getMixedUpperBound()[0]);
  cb.create<func::ReturnOp>(loop.getLoc(), countMap.lookupOrDefault(upper));

  // @<name>_run(first, last, args): tasks [first, last) in order.
  IRMapping runMap;
  func::FuncOp run = startTaskFunction(b, kernel, loop, name + "_run", 2, {}, runMap);
  Block& entry = run.getBody().front();
  OpBuilder rb = OpBuilder::atBlockEnd(&entry);
  Location loc = loop.getLoc();
  Value step = rb.create<arith::ConstantIndexOp>(loc, 1);
  auto tasks = rb.create<scf::ForOp>(loc, entry.getArgument(0), entry.getArgument(1), step);
  auto ret = rb.create<func::ReturnOp>(loc);
  runMap.map(loop.getInductionVar(0), tasks.getInductionVar());

  // Stack buffers of static size move to the entry: allocated once per run, not per task; to
  // the heap when together they would take more than `stackBytes` of the thread's stack.
  SmallVector<memref::AllocaOp> hoisted;
  int64_t bytes = 0;
  for (Operation& op : loop.getBody()->without_terminator())
    if (auto alloca = dyn_cast<memref::AllocaOp>(op);
        alloca && alloca.getType().hasStaticShape()) {
      MemRefType type = alloca.getType();
      bytes += type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8);
      hoisted.push_back(alloca);
    }
  const bool onHeap = bytes > stackBytes;
  OpBuilder eb = OpBuilder::atBlockBegin(&entry);
  OpBuilder db(ret);
  for (memref::AllocaOp alloca : hoisted) {
    if (!onHeap) {
      eb.clone(*alloca, runMap);
      continue;
    }
    auto heap = eb.create<memref::AllocOp>(alloca.getLoc(), alloca.getType(),
                                           alloca.getAlignmentAttr());
    runMap.map(alloca.getResult(), heap.getResult());
    db.create<memref::DeallocOp>(alloca.getLoc(), heap.getResult());
  }
  OpBuilder tb = OpBuilder::atBlockBegin(tasks.getBody());
  for (Operation& op : loop.getBody()->without_terminator())
    if (!llvm::is_contained(hoisted, dyn_cast<memref::AllocaOp>(op)))
      tb.clone(op, runMap);
  kernel.erase();
  return success();
}

struct OutlineTasksPass : attnc::attn::impl::AttnOutlineTasksBase<OutlineTasksPass> {
  using AttnOutlineTasksBase::AttnOutlineTasksBase;
  void runOnOperation() override {
    SmallVector<func::FuncOp> kernels;
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (fn->hasAttr("attn.kernel"))
        kernels.push_back(fn);
    for (func::FuncOp kernel : kernels)
      if (failed(outline(kernel, stackBytes)))
        return signalPassFailure();
  }
};

} // namespace
