// The Halide backend: spec -> Halide algorithm + schedule -> object code -> bundle (and, with
// --emit, a static library and header for ahead-of-time linking, the lowered stmt, assembly).
#ifndef ATTNC_COMPILER_BACKENDS_HALIDE_HALIDEBACKEND_H
#define ATTNC_COMPILER_BACKENDS_HALIDE_HALIDEBACKEND_H

#include "Backends/Backend.h"

namespace attnc {

// The instance the driver registers.
const Backend& halideBackend();

} // namespace attnc

#endif // ATTNC_COMPILER_BACKENDS_HALIDE_HALIDEBACKEND_H
