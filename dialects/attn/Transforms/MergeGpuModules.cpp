//===- MergeGpuModules.cpp - one gpu.module per kernel function ---------------===//
//
// gpu-kernel-outlining makes a gpu.module per gpu.launch. A kernel function with several
// launches (the split-key kernel and its merge) then embeds several PTX images, each loaded
// and JIT-compiled separately; merged, the bundle carries one PTX module with several entries.
//
//===---------------------------------------------------------------------------===//
#include "attn/Transforms/Passes.h"
#include "mlir/IR/SymbolTable.h"

namespace attnc::attn {
#define GEN_PASS_DEF_ATTNMERGEGPUMODULES
#include "attn/Transforms/Passes.h.inc"
} // namespace attnc::attn

using namespace mlir;

namespace {

struct MergeGpuModulesPass : attnc::attn::impl::AttnMergeGpuModulesBase<MergeGpuModulesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::GPUModuleOp> modules(module.getOps<gpu::GPUModuleOp>());
    if (modules.size() < 2)
      return;
    gpu::GPUModuleOp target = modules.front();
    SymbolTable table(target);
    for (gpu::GPUModuleOp source : llvm::drop_begin(modules)) {
      for (Operation& op : llvm::make_early_inc_range(source.getBody()->getOperations())) {
        auto symbol = dyn_cast<SymbolOpInterface>(op);
        if (!symbol)
          continue;
        // Globals outlining copied into every module (the ALiBi slopes) are the same object.
        if (!isa<gpu::GPUFuncOp>(op) && table.lookup(symbol.getName()))
          continue;
        StringAttr oldName = symbol.getNameAttr();
        op.remove();
        StringAttr newName = table.insert(&op); // renamed when the name is taken
        module.walk([&](gpu::LaunchFuncOp launch) {
          if (launch.getKernelModuleName() == source.getNameAttr() &&
              launch.getKernelName() == oldName)
            launch.setKernelAttr(
                SymbolRefAttr::get(target.getNameAttr(), {FlatSymbolRefAttr::get(newName)}));
        });
      }
      source.erase();
    }
  }
};

} // namespace
