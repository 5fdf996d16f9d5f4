// The MLIR backend: spec -> attn dialect -> online softmax -> tiled (transform-dialect
// schedule) -> vector -> LLVM -> object code -> bundle. It lives in its own shared library
// (libattnc_mlir.so) that exports only these functions, so that LLVM 19 inside it never meets
// Halide's LLVM 14 in the attnc executable.
#ifndef ATTNC_COMPILER_BACKENDS_MLIR_MLIRBACKEND_H
#define ATTNC_COMPILER_BACKENDS_MLIR_MLIRBACKEND_H

#include "Backends/Backend.h"

#include <string>
#include <vector>

#define ATTNC_MLIR_EXPORT __attribute__((visibility("default")))

namespace attnc {

// Emit kinds: so (bundle + manifest), mlir (the attn-stage module), llvm (optimised LLVM IR of
// the host code), asm, obj, and ptx for cuda targets.
ATTNC_MLIR_EXPORT CompileResult compileMlir(const Spec& spec, const CompileOptions& options);

// The tuner's space for `target` (UsageError for a target the backend does not know).
ATTNC_MLIR_EXPORT TuningSpace mlirTuningSpace(const Spec& spec, const std::string& target);

// The spec and schedule ("spec"), then the IR after each stage ("attn", "online", "tiled",
// "vector", ["gpu",] "llvm"), or `stage` alone when it is not empty; UsageError for an
// unknown stage.
ATTNC_MLIR_EXPORT std::string explainMlir(const Spec& spec, const CompileOptions& options,
                                          const std::string& stage, bool printIrAfterAll);

} // namespace attnc

#endif // ATTNC_COMPILER_BACKENDS_MLIR_MLIRBACKEND_H
