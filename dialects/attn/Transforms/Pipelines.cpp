//===- Pipelines.cpp - the "llvm" stage and pass registration ------------------===//
#include "attn/Transforms/Passes.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace attnc::attn {

void buildLowerToLLVMPipeline(OpPassManager& pm) {
  pm.addPass(createAttnOutlineTasks());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createAttnApproximateMath());
  // bf16 conversions as integer ops: no libgcc on Debian 12 has __truncsfbf2.
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createConvertSCFToCFPass());
  pm.addPass(createConvertVectorToLLVMPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void registerAttnPipelines() {
  registerAttnPasses();
  PassPipelineRegistration<>("attn-lower-to-llvm",
                             "The llvm stage: task functions, approximated math, LLVM dialect",
                             buildLowerToLLVMPipeline);
}

} // namespace attnc::attn
