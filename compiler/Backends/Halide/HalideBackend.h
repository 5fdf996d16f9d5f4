// The Halide backend: spec -> Halide algorithm + schedule -> object code -> bundle (and, with
// --emit, a static library and header for ahead-of-time linking, the lowered stmt, assembly).
#ifndef ATTNC_COMPILER_BACKENDS_HALIDE_HALIDEBACKEND_H
#define ATTNC_COMPILER_BACKENDS_HALIDE_HALIDEBACKEND_H

#include "Backends/Backend.h"

namespace attnc {

CompileResult compileHalide(const Spec& spec, const CompileOptions& options);

// The tuner's space for `target` (UsageError for a target the backend does not know).
TuningSpace halideTuningSpace(const Spec& spec, const std::string& target);

} // namespace attnc

#endif // ATTNC_COMPILER_BACKENDS_HALIDE_HALIDEBACKEND_H
