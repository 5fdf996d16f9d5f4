// The MLIR backend's stages: spec -> attn -> online -> tiled -> vector -> llvm. Each stage
// rewrites the module in place; a callback sees the IR after each one (attnc explain).
#ifndef ATTNC_COMPILER_BACKENDS_MLIR_MLIRPIPELINE_H
#define ATTNC_COMPILER_BACKENDS_MLIR_MLIRPIPELINE_H

#include "ScheduleParams.h"
#include "Spec/Spec.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <array>
#include <functional>
#include <string_view>

namespace attnc::mlirbackend {

inline constexpr std::array<std::string_view, 5> kStages{"attn", "online", "tiled", "vector",
                                                         "llvm"};

// A context with every dialect, extension and translation the pipeline uses.
std::unique_ptr<mlir::MLIRContext> makeContext();

struct PipelineOptions {
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
