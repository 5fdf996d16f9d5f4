// The MLIR backend's stages: spec -> attn -> online -> tiled -> vector -> llvm on CPUs, with
// a gpu stage before llvm on CUDA. Each stage rewrites the module in place; a callback sees
// the IR after each one (attnc explain).
#ifndef ATTNC_COMPILER_BACKENDS_MLIR_MLIRPIPELINE_H
#define ATTNC_COMPILER_BACKENDS_MLIR_MLIRPIPELINE_H

#include "ScheduleFamily.h"
#include "ScheduleParams.h"
#include "Spec/Spec.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <functional>
#include <string_view>
#include <vector>

namespace attnc::mlirbackend {

// The stages for a schedule family (those that run on a GPU add the "gpu" stage), in order.
std::vector<std::string_view> stagesFor(ScheduleFamily family);

// A context with every dialect, extension and translation the pipeline uses.
std::unique_ptr<mlir::MLIRContext> makeContext();

struct PipelineOptions {
  ScheduleFamily family = ScheduleFamily::X86Avx512; // as mlirschedule::scheduleFamily picks it
  std::string gpuChip, ptxFeatures;                  // cuda: "sm_90", "+ptx80"
  // After each stage (including "attn", the module as built from the spec).
  std::function<void(std::string_view stage, mlir::ModuleOp module)> afterStage;
  bool printIrAfterAll = false; // MLIR's --mlir-print-ir-after-all, to stderr
};

// Builds the module for `spec` and runs every stage with `params`' schedule. Throws JobError
// with MLIR's diagnostics when a stage fails.
mlir::OwningOpRef<mlir::ModuleOp> runPipeline(mlir::MLIRContext& context, const Spec& spec,
                                              const ScheduleParams& params,
                                              const PipelineOptions& options);

} // namespace attnc::mlirbackend

#endif // ATTNC_COMPILER_BACKENDS_MLIR_MLIRPIPELINE_H
