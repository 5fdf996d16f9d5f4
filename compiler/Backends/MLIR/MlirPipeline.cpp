#include "Backends/MLIR/MlirPipeline.h"

#include "Backends/MLIR/SpecToAttn.h"
#include "Support/Errors.h"
#include "attn/IR/AttnDialect.h"
#include "attn/TransformOps/AttnTransformOps.h"
#include "attn/Transforms/Passes.h"
#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/TransformOps/DialectExtension.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Transform/IR/TransformDialect.h"
#include "mlir/Dialect/Transform/Transforms/TransformInterpreterUtils.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/AMX/AMXToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"
#include "transform/TransformSchedule.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace attnc::mlirbackend {
namespace {

// Collects MLIR's diagnostics while alive, so failures become a JobError naming them.
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(MLIRContext& context)
      : handler(&context, [this](Diagnostic& d) {
          llvm::raw_string_ostream os(text);
          os << d.getLocation() << ": " << d << "\n";
          for (const Diagnostic& note : d.getNotes())
            os << "  note: " << note << "\n";
          return success();
        }) {}
  [[noreturn]] void fail(std::string_view stage) const {
    throw JobError("mlir backend: the " + std::string(stage) + " stage failed:\n" + text);
  }

private:
  std::string text;
  ScopedDiagnosticHandler handler;
};

void runPasses(ModuleOp module, std::string_view stage, const PipelineOptions& options,
               const DiagnosticCollector& diagnostics,
               const std::function<void(OpPassManager&)>& add) {
  PassManager pm(module.getContext());
  if (options.printIrAfterAll) {
    module.getContext()->disableMultithreading();
    pm.enableIRPrinting([](Pass*, Operation*) { return false; },
                        [](Pass*, Operation*) { return true; }, /*printModuleScope=*/true);
  }
  add(pm);
  if (failed(pm.run(module)))
    diagnostics.fail(stage);
}

// Runs the schedule's named sequence `entry` on the module, then cleans up.
void runSchedule(ModuleOp module, ModuleOp schedule, StringRef entry, std::string_view stage,
                 const PipelineOptions& options, const DiagnosticCollector& diagnostics) {
  Operation* sequence =
      mlir::transform::detail::findTransformEntryPoint(schedule, ModuleOp(), entry);
  if (!sequence || failed(mlir::transform::applyTransformNamedSequence(
                       module, sequence, schedule, mlir::transform::TransformOptions())))
    diagnostics.fail(stage);
  runPasses(module, stage, options, diagnostics, [](OpPassManager& pm) {
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
  });
}

} // namespace

std::vector<std::string_view> stagesFor(ScheduleFamily family) {
  if (runsOnGpu(family))
    return {"attn", "online", "tiled", "vector", "gpu", "llvm"};
  return {"attn", "online", "tiled", "vector", "llvm"};
}

std::unique_ptr<MLIRContext> makeContext() {
  DialectRegistry registry;
  registry.insert<attn::AttnDialect, amx::AMXDialect, affine::AffineDialect, arith::ArithDialect,
                  bufferization::BufferizationDialect, cf::ControlFlowDialect, func::FuncDialect,
                  gpu::GPUDialect, index::IndexDialect, LLVM::LLVMDialect, NVVM::NVVMDialect,
                  math::MathDialect, memref::MemRefDialect, nvgpu::NVGPUDialect, scf::SCFDialect,
                  mlir::transform::TransformDialect, vector::VectorDialect>();
  attn::registerTransformDialectExtension(registry);
  linalg::registerTransformDialectExtension(registry);
  registerAMXDialectTranslation(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  // CUDA: gpu-module-to-binary serializes through the NVVM target; the host translation
  // embeds the PTX and launches through mgpu* calls.
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerGPUDialectTranslation(registry);
  gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(registry);
  registerNVVMDialectTranslation(registry);
  auto context = std::make_unique<MLIRContext>(registry);
  context->loadAllAvailableDialects();
  return context;
}

OwningOpRef<ModuleOp> runPipeline(MLIRContext& context, const Spec& spec,
                                  const ScheduleParams& params, const PipelineOptions& options) {
  DiagnosticCollector diagnostics(context);
  auto after = [&](std::string_view stage, ModuleOp module) {
    if (options.afterStage)
      options.afterStage(stage, module);
  };
  OwningOpRef<ModuleOp> module =
      buildAttnModule(context, spec, mlirschedule::attentionOperandDtype(spec, options.family));
  if (failed(mlir::verify(*module)))
    diagnostics.fail("attn");
  after("attn", *module);

  runPasses(*module, "online", options, diagnostics, [](OpPassManager& pm) {
    pm.addNestedPass<func::FuncOp>(attn::createAttnToOnline());
    pm.addPass(createCanonicalizerPass());
  });
  after("online", *module);

  const std::string script = mlirschedule::instantiateSchedule(options.family, params);
  OwningOpRef<ModuleOp> schedule = parseSourceString<ModuleOp>(
      script, &context, "schedule " + std::string(scheduleFamilyName(options.family)));
  if (!schedule)
    diagnostics.fail("tiled (parsing the schedule)");
  runSchedule(*module, *schedule, "tile", "tiled", options, diagnostics);
  after("tiled", *module);
  runSchedule(*module, *schedule, "vectorize", "vector", options, diagnostics);
  after("vector", *module);

  if (runsOnGpu(options.family)) {
    // The tensor-core schedule launched the attention itself (lower_to_mma); its other phases
    // (RoPE's rotations) run blocks of 128 threads.
    const int64_t blockThreads =
        options.family == ScheduleFamily::Cuda ? params.get("block_threads") : 128;
    runPasses(*module, "gpu", options, diagnostics,
              [&](OpPassManager& pm) { attn::buildMapToGpuPipeline(pm, blockThreads); });
    after("gpu", *module);
    runPasses(*module, "llvm", options, diagnostics, [&](OpPassManager& pm) {
      attn::buildGpuLowerToLLVMPipeline(pm, options.gpuChip, options.ptxFeatures);
    });
  } else {
    runPasses(*module, "llvm", options, diagnostics,
              [](OpPassManager& pm) { attn::buildLowerToLLVMPipeline(pm); });
  }
  after("llvm", *module);
  return module;
}

} // namespace attnc::mlirbackend
