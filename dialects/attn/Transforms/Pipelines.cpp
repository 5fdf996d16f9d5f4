//===- Pipelines.cpp - the "llvm" stage and pass registration ------------------===//
#include "attn/Transforms/Passes.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace attnc::attn {

namespace {

// Kernel code down to the LLVM dialect's vectors and control flow: polynomial math, bf16 as
// integer ops (no libgcc on Debian 12 has __truncsfbf2; NVPTX has no bf16 conversions either),
// flat memref metadata, then scf and vector (with AMX's tile ops, LowerUpdate's) to LLVM, and
// masked bf16 loads and stores as i16 ones (the same libcall, on x86 without AVX512-BF16).
void addKernelLowering(OpPassManager& pm, bool noLibdevice) {
  AttnApproximateMathOptions math;
  math.noLibdevice = noLibdevice;
  pm.addPass(createAttnApproximateMath(math));
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createConvertSCFToCFPass());
  ConvertVectorToLLVMPassOptions vectorOptions;
  vectorOptions.amx = true;
  pm.addPass(createConvertVectorToLLVMPass(vectorOptions));
  pm.addPass(createAttnBf16MemoryAsI16());
}

} // namespace

void buildLowerToLLVMPipeline(OpPassManager& pm) {
  pm.addPass(createAttnOutlineTasks());
  pm.addPass(createCanonicalizerPass());
  addKernelLowering(pm, /*noLibdevice=*/false);
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

void buildMapToGpuPipeline(OpPassManager& pm, int64_t blockThreads) {
  AttnMapTasksToGpuOptions options;
  options.blockThreads = blockThreads;
  pm.addPass(createAttnMapTasksToGpu(options));
  pm.addPass(createGpuKernelOutliningPass());
  pm.addPass(createAttnMergeGpuModules());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void buildGpuLowerToLLVMPipeline(OpPassManager& pm, const std::string& chip,
                                 const std::string& ptxFeatures) {
  // Device code: the same scalar-and-vector lowering as on the CPU, then NVVM.
  OpPassManager& device = pm.nest<gpu::GPUModuleOp>();
  device.addPass(createAttnLowerToNvvmIntrinsics());
  device.addPass(createConvertNVGPUToNVVMPass());
  addKernelLowering(device, /*noLibdevice=*/true);
  device.addPass(createConvertMathToLLVMPass());
  ConvertGpuOpsToNVVMOpsOptions nvvm;
  nvvm.indexBitwidth = 64;
  device.addPass(createConvertGpuOpsToNVVMOps(nvvm));
  device.addPass(createReconcileUnrealizedCastsPass());
  device.addPass(createCanonicalizerPass());
  device.addPass(createCSEPass());
  GpuNVVMAttachTargetOptions target;
  target.chip = chip;
  target.features = ptxFeatures;
  target.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(target));

  // Host code: everything as on the CPU, then the launch through mgpu* calls.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(arith::createArithExpandOpsPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createConvertSCFToCFPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createGpuToLLVMConversionPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa"; // PTX; the driver compiles it for the device it runs on
  pm.addPass(createGpuModuleToBinaryPass(binary));
  pm.addPass(createCanonicalizerPass());
}

void registerAttnPipelines() {
  registerAttnPasses();
  PassPipelineRegistration<>("attn-lower-to-llvm",
                             "The llvm stage: task functions, approximated math, LLVM dialect",
                             buildLowerToLLVMPipeline);
}

} // namespace attnc::attn
