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

// A kernel's schedule for a range of sequence lengths (both ends included): a tuned one, or the
// decode kernel's.
struct ShapeSchedule {
  int64_t seqQLo, seqQHi, seqKLo, seqKHi;
  std::string backend;
  std::map<std::string, int64_t> schedule;
  std::string provenance;
  // Run only for shapes inside the ranges, never as the nearest kernel (the decode kernel).
  bool onlyInside = false;
};

// One target's kernel in a compile request.
struct KernelRequest {
  // A backend's name, or "auto": the fastest that covers the spec (fastestBackendFor).
  std::string backend = "auto";
  Target target = parseTarget("host");
  // Schedule parameters instead of the target's defaults, and where they come from.
  std::map<std::string, int64_t> schedule;
  std::string scheduleProvenance;
  // Two or more: a kernel per range of sequence lengths, each with its own backend and
  // schedule, picked per call (ShapeDispatch.h); schedule above is then unused, and backend
  // picks only the decode kernel's.
  std::vector<ShapeSchedule> shapeSchedules;
  // Short queries (Tq <= kDecodeRows) run a decode kernel when a backend the request allows has
  // one: the bundle holds it beside the others and picks per call (ShapeDispatch.h). False: the
  // schedule asked for, alone (attnc compile --schedule).
  bool withDecode = true;
};

// What a compile writes, and of which kernels.
struct CompileRequest {
  std::vector<KernelRequest> kernels; // one per target, as given
  std::filesystem::path outDir;
  EmitSet emit = {Emit::So};
  std::string libraryName; // emit lib: the C name of its symbol, header and class; empty:
                           // attnc_<variant>_<hash>

  enum class Kind {
    Single,        // one kernel of one backend
    ShapeDispatch, // one target, two or more shape schedules: one bundle picking per call
    Fat,           // two or more targets, or emit lib: one artifact of a kernel per target
  };
  Kind kind() const; // of a request with at least one kernel
};

// Every backend this attnc was built with, registered once each, in the order `--backend auto`
// prefers them: fastest first (docs/benchmarks.md measures MLIR 1.1-1.3x faster than Halide on
// the specs both cover), the reference last.
std::span<const Backend* const> registeredBackends();

// The backend called `name`; UsageError naming the built ones otherwise.
const Backend& backendNamed(const std::string& name);

// What `--backend auto` means without a tuning record: the first registered backend but the
// reference that builds `spec` for `target`, passing over one that visits the keys a mask of
// the spec masks (Coverage::elementwiseMasks) when a later one does not. UsageError with each one's
// reason when none builds it.
const Backend& fastestBackendFor(const Spec& spec, const Target& target);

// Throws UsageError for a request without kernels, an unknown backend, a target it does not
// know or a spec it does not cover (Backend::unsupported), and JobError when building fails.
CompileResult compileBundle(const Spec& spec, const CompileRequest& request);

// One target's kernel (a shape-dispatch bundle when it has shape schedules) with `emit`'s
// artifacts in `outDir`: compileBundle's single and shape-dispatch requests, and each member of
// a fat one.
CompileResult compileKernel(const Spec& spec, const KernelRequest& kernel, const EmitSet& emit,
                            const std::filesystem::path& outDir);

// The spaces of every built backend that can be tuned for `target` (the reference cannot).
std::vector<TuningSpace> tuningSpaces(const Spec& spec, const Target& target);

// The stages of options.backend (attnc explain names the MLIR backend), or UsageError when it
// has none.
std::string explainStages(const Spec& spec, const CompileOptions& options, const std::string& stage,
                          bool printIrAfterAll);

} // namespace attnc

#endif // ATTNC_COMPILER_DRIVER_DRIVER_H
