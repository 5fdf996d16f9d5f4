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

// One launch of blockThreads-thread blocks running the loop's iterations, a thread each.
void mapLoop(scf::ForallOp loop, int64_t blockThreads) {
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
}

// A block's workspace buffers (memref.alloc beside its phases) in device memory, allocated and
// freed in order on the stream the launches run on (the caller's).
void moveWorkspaceToDevice(Block& block) {
  SmallVector<memref::AllocOp> allocs;
  SmallVector<memref::DeallocOp> deallocs;
  for (Operation& op : block) {
    if (auto alloc = dyn_cast<memref::AllocOp>(op))
      allocs.push_back(alloc);
    else if (auto dealloc = dyn_cast<memref::DeallocOp>(op))
      deallocs.push_back(dealloc);
  }
  if (allocs.empty())
    return;
  ImplicitLocOpBuilder b(allocs.front().getLoc(), allocs.front());
  auto tokenType = gpu::AsyncTokenType::get(b.getContext());
  Value token = b.create<gpu::WaitOp>(tokenType, ValueRange{}).getAsyncToken();
  for (memref::AllocOp alloc : allocs) {
    b.setInsertionPoint(alloc);
    auto device = b.create<gpu::AllocOp>(alloc.getType(), tokenType, ValueRange{token},
                                         alloc.getDynamicSizes(), ValueRange{});
    token = device.getAsyncToken();
    alloc.replaceAllUsesWith(device.getMemref());
    alloc.erase();
  }
  for (memref::DeallocOp dealloc : deallocs) {
    b.setInsertionPoint(dealloc);
    auto release = b.create<gpu::DeallocOp>(tokenType, ValueRange{token}, dealloc.getMemref());
    token = release.getAsyncToken();
    dealloc.erase();
    b.setInsertionPointAfter(release);
  }
  b.create<gpu::WaitOp>(Type(), ValueRange{token});
}

// Each phase of the kernel (an scf.forall in its body, or in a branch of it: the tensor-core
// schedule's decode steps and prefills) becomes a launch, in order on one stream; a tensor-core
// schedule launched the attention's itself (lower_to_mma). The workspace of the kernel's body
// and of its branches goes to the device.
LogicalResult mapToGpu(func::FuncOp kernel, int64_t blockThreads) {
  SmallVector<scf::ForallOp> loops;
  kernel.walk([&](scf::ForallOp forall) { loops.push_back(forall); });
  for (scf::ForallOp loop : loops)
    if (loop.getRank() != 1 || !loop.getOutputs().empty() ||
        loop->getParentOfType<scf::ForallOp>() || loop->getParentOfType<gpu::LaunchOp>())
      return kernel.emitOpError()
             << "attn-map-tasks-to-gpu needs outermost 1-d scf.forall loops without outputs";
  if (!loops.empty() && blockThreads <= 0)
    return kernel.emitOpError() << "attn-map-tasks-to-gpu needs block-threads > 0";
  for (scf::ForallOp loop : loops)
    mapLoop(loop, blockThreads);
  SmallVector<Block*> blocks{&kernel.getBody().front()};
  kernel.walk([&](scf::IfOp branch) {
    if (!branch->getParentOfType<gpu::LaunchOp>())
      for (Region& region : branch->getRegions())
        if (!region.empty())
          blocks.push_back(&region.front());
  });
  for (Block* block : blocks)
    moveWorkspaceToDevice(*block);
  kernel->setAttr("llvm.emit_c_interface", UnitAttr::get(kernel.getContext()));
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
