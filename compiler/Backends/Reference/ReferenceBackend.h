// The reference backend: bundles whose kernel is the f64 reference (Reference/Reference.h).
#ifndef ATTNC_COMPILER_BACKENDS_REFERENCE_REFERENCEBACKEND_H
#define ATTNC_COMPILER_BACKENDS_REFERENCE_REFERENCEBACKEND_H

#include "Backends/Backend.h"

namespace attnc {

// The instance the driver registers. Its bundles link libattnc_bundle_reference.a (the kernel
// entry) and libattnc_core.a (spec, reference) with the manifest. The code is built for the
// host without optional CPU features, so the only target is "host". It covers every spec, has
// nothing to tune, and `--backend auto` never picks it (it runs about 60x slower than the
// others).
const Backend& referenceBackend();

} // namespace attnc

#endif // ATTNC_COMPILER_BACKENDS_REFERENCE_REFERENCEBACKEND_H
