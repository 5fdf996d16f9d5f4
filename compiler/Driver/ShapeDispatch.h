// Shape-dispatch bundles: one bundle holding a kernel per tuned shape bucket of a spec (each
// with its own backend and schedule), and an entry that picks one per call by (Tq, Tk)
// (runtime/bundle/ShapeDispatchKernel.cpp).
//
// Each bucket's kernel is compiled by its backend as a part (BundleWriter's writeBundlePart);
// its generated functions are renamed apart (objcopy, with every other symbol of the kernel
// object made local), and one link puts them together with each backend's entry library, one
// copy of shared objects (the Halide runtime), the dispatch entry and a generated table.
#ifndef ATTNC_COMPILER_DRIVER_SHAPEDISPATCH_H
#define ATTNC_COMPILER_DRIVER_SHAPEDISPATCH_H

#include "Backends/Backend.h"

namespace attnc {

// Throws UsageError for what cannot be a shape-dispatch bundle (emit other than so, a CUDA
// target, parts whose arguments differ), JobError when a tool fails.
CompileResult compileShapeDispatch(const Spec& spec, const CompileOptions& options);

} // namespace attnc

#endif // ATTNC_COMPILER_DRIVER_SHAPEDISPATCH_H
