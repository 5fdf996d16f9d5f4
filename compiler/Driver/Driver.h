// The driver: the registry of the backends built into this attnc, and the one entry that
// turns a spec and options into artifacts (a backend's bundle, a shape-dispatch bundle or a fat
// bundle). The tools call only this.
#ifndef ATTNC_COMPILER_DRIVER_DRIVER_H
#define ATTNC_COMPILER_DRIVER_DRIVER_H

#include "Backends/Backend.h"

#include <span>
#include <string>
#include <vector>

namespace attnc {

// Every backend this attnc was built with, registered once each, in the order `--backend auto`
// prefers them: fastest first (docs/benchmarks.md measures MLIR 1.1-1.3x faster than Halide on
// the specs both cover), the reference last.
std::span<const Backend* const> registeredBackends();

// The backend called `name`; UsageError naming the built ones otherwise.
const Backend& backendNamed(const std::string& name);

// What `--backend auto` means without a tuning record: the first registered backend but the
// reference that builds `spec` for `target`. UsageError with each one's reason when none does.
const Backend& fastestBackendFor(const Spec& spec, const std::string& target);

// Throws UsageError for an unknown backend, a target it does not know or a spec it does not
// cover (Backend::unsupported), and JobError when building fails.
CompileResult compileBundle(const Spec& spec, const CompileOptions& options);

// The spaces of every built backend that can be tuned for `target` (the reference cannot).
// Throws UsageError for a target no backend knows.
std::vector<TuningSpace> tuningSpaces(const Spec& spec, const std::string& target);

// options.backend's stages (the MLIR backend's when it is "auto"), for attnc explain.
std::string explainStages(const Spec& spec, const CompileOptions& options, const std::string& stage,
                          bool printIrAfterAll);

} // namespace attnc

#endif // ATTNC_COMPILER_DRIVER_DRIVER_H
