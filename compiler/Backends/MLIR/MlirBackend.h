// The MLIR backend: spec -> attn dialect -> online softmax -> tiled (transform-dialect
// schedule) -> vector -> LLVM -> object code -> bundle. It lives in its own shared library
// (libattnc_mlir.so) that exports only mlirBackend(), so that LLVM 19 inside it never meets
// Halide's LLVM 14 in the attnc executable.
#ifndef ATTNC_COMPILER_BACKENDS_MLIR_MLIRBACKEND_H
#define ATTNC_COMPILER_BACKENDS_MLIR_MLIRBACKEND_H

#include "Backends/Backend.h"

#define ATTNC_MLIR_EXPORT __attribute__((visibility("default")))

namespace attnc {

// The instance the driver registers. Emit kinds: so (bundle + manifest), mlir (the attn-stage
// module), llvm (optimised LLVM IR of the host code), asm, obj, and ptx for cuda targets.
// explain prints the spec and schedule ("spec"), then the IR after each stage ("attn",
// "online", "tiled", "vector", ["gpu",] "llvm").
ATTNC_MLIR_EXPORT const Backend& mlirBackend();

} // namespace attnc

#endif // ATTNC_COMPILER_BACKENDS_MLIR_MLIRBACKEND_H
