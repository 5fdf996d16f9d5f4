//===- MapTasksToGpu.cpp - a kernel's task loop as GPU threads ----------------===//
#include "attn/Transforms/Passes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace attnc::attn {
#define GEN_PASS_DEF_ATTNMAPTASKSTOGPU
#include "attn/Transforms/Passes.h.inc"
} // namespace attnc::attn

using namespace mlir;

namespace {

LogicalResult mapToGpu(func::FuncOp kernel, int64_t blockThreads) {
  if (kernel.walk([](gpu::LaunchOp) { return WalkResult::interrupt(); }).wasInterrupted())
    return success(); // its schedule launched it already (lower_to_mma)
  SmallVector<scf::ForallOp> loops;
  kernel.walk([&](scf::ForallOp forall) { loops.push_back(forall); });
  if (loops.size() != 1 || loops.front().getRank() != 1 || !loops.front().getOutputs().empty() ||
      loops.front()->getParentOp() != kernel)
    return kernel.emitOpError() << "attn-map-tasks-to-gpu needs one top-level 1-d scf.forall";
  scf::ForallOp loop = loops.front();

  ImplicitLocOpBuilder b(loop.getLoc(), loop);
  Value tasks = getValueOrCreateConstantIndexOp(b, loop.getLoc(), loop.getMixedUpperBound()[0]);
  Value one = b.create<arith::ConstantIndexOp>(1);
  Value threads = b.create<arith::ConstantIndexOp>(blockThreads);
  Value blocks = b.create<arith::CeilDivUIOp>(tasks, threads);
  auto launch = b.create<gpu::LaunchOp>(blocks, one, one, threads, one, one);

  // task = block * blockThreads + thread, run when task < tasks.
  b.setInsertionPointToStart(&launch.getBody().front());
  Value task = b.create<arith::AddIOp>(b.create<arith::MulIOp>(launch.getBlockIds().x, threads),
                                       launch.getThreadIds().x);
  Value live = b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, task, tasks);
  auto guard = b.create<scf::IfOp>(live, /*withElseRegion=*/false);
  b.create<gpu::TerminatorOp>();

  IRMapping mapping;
  mapping.map(loop.getInductionVar(0), task);
  OpBuilder body = OpBuilder::atBlockBegin(guard.thenBlock());
  for (Operation& op : loop.getBody()->without_terminator())
    body.clone(op, mapping);
  loop.erase();
  kernel->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  return success();
}

struct MapTasksToGpuPass : attnc::attn::impl::AttnMapTasksToGpuBase<MapTasksToGpuPass> {
  using AttnMapTasksToGpuBase::AttnMapTasksToGpuBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), UnitAttr::get(&getContext()));
    for (auto kernel : module.getOps<func::FuncOp>())
      if (kernel->hasAttr("attn.kernel") && failed(mapToGpu(kernel, blockThreads)))
        return signalPassFailure();
  }
};

} // namespace
