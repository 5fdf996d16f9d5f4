// Fat bundles and linked libraries: one spec compiled for several targets — CPU levels (AVX2,
// AVX-512, Sapphire Rapids) and GPUs — in one artifact, from which the runtime picks at load
// time the first target this host supports (attnc.h; ATTNC_TARGET forces one).
//
// Each target's kernel is compiled by its backend and sealed (BundleWriter's sealBundle: one
// relocatable object whose only global symbol is its attnc_kernel_run, renamed
// attnc_target<i>_run here), so targets never clash, even with one runtime's names inside each.
// A generated table lists their run functions best first (GPUs, then CPU levels by how many
// features they need); the entry library (runtime/bundle/FatKernel.cpp) gives the bundle an
// attnc_kernel_run that runs the last target, for runtimes that predate fat bundles.
//
//   emit "so":  <variant>_<hash>_<backends>_fat.so, exporting the table as well
//   emit "lib": lib<name>.a (the same objects sealed once more, behind one attnc_kernel_exports
//               <name>_kernel), <name>.h (LinkedHeader.h) and <name>.json, for applications
//               that link the kernel ahead of time (even for one target)
// Other kinds (asm, obj, stmt, ...) are written per target, as a plain compile would.
#ifndef ATTNC_COMPILER_DRIVER_FATBUNDLE_H
#define ATTNC_COMPILER_DRIVER_FATBUNDLE_H

#include "Driver/Driver.h"

namespace attnc {

// Throws UsageError for a target listed twice, targets of different architectures or kernels
// taking different arguments, JobError when a tool fails.
CompileResult compileFatBundle(const Spec& spec, const CompileRequest& request);

} // namespace attnc

#endif // ATTNC_COMPILER_DRIVER_FATBUNDLE_H
