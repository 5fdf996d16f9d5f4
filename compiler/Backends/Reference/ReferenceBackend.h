// The reference backend: bundles whose kernel is the f64 reference (Reference/Reference.h).
#ifndef ATTNC_COMPILER_BACKENDS_REFERENCE_REFERENCEBACKEND_H
#define ATTNC_COMPILER_BACKENDS_REFERENCE_REFERENCEBACKEND_H

#include "Backends/Backend.h"

namespace attnc {

// Links libattnc_bundle_reference.a (the kernel entry) and libattnc_core.a (spec, reference)
// with the manifest. The code is built for the host without optional CPU features, so the
// only target is "host".
CompileResult compileReferenceBundle(const Spec& spec, const CompileOptions& options);

} // namespace attnc

#endif // ATTNC_COMPILER_BACKENDS_REFERENCE_REFERENCEBACKEND_H
