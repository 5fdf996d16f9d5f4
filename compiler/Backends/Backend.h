// Code generators by name. Each turns a spec and a target into a bundle through the shared
// bundle writer; the tools only ever call compileBundle.
#ifndef ATTNC_COMPILER_BACKENDS_BACKEND_H
#define ATTNC_COMPILER_BACKENDS_BACKEND_H

#include "Artifact/BundleWriter.h"
#include "ScheduleParams.h"
#include "Spec/Spec.h"

#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace attnc {

struct CompileOptions {
  std::string backend = "reference";
  std::string target = "host";
  std::filesystem::path outDir;
  // Artifacts to write: so (the bundle and its manifest), lib (a linked library, with several
  // targets or one: see `targets`), a and h (Halide's own static library and C header), obj,
  // asm, stmt. Backends refuse kinds they cannot produce.
  std::set<std::string> emit = {"so"};
  // Schedule parameters to use instead of the target's defaults (checked against the space).
  std::map<std::string, int64_t> schedule;
  // Where those come from, for the manifest (a tuning record); empty: the command line.
  std::string scheduleProvenance;
  // Several tuned schedules, each for a range of sequence lengths: with two or more, the
  // bundle holds a kernel per range and picks one per call (ShapeDispatch.h); backend,
  // schedule and scheduleProvenance above are then unused.
  struct ShapeSchedule {
    int64_t seqQLo, seqQHi, seqKLo, seqKHi;
    std::string backend;
    std::map<std::string, int64_t> schedule;
    std::string provenance;
  };
  std::vector<ShapeSchedule> shapeSchedules;
  // Two or more, or emit "lib": one fat bundle or linked library of a kernel per entry (each
  // with its own target, backend, schedule or shape schedules; their emit and outDir unused),
  // FatBundle.h. The fields above are then unused, but for emit ("so", "lib", and kinds each
  // target writes) and outDir.
  std::vector<CompileOptions> targets;
  // emit "lib": the C name of its symbol, header and class; empty: attnc_<variant>_<hash>.
  std::string libraryName;
};

// What `attnc tune` searches for one backend on one target: the tunable parameters with their
// choices (the others stay at the default), the default, and the backend's own check of a
// combination, which throws UsageError naming the clash as compile would.
struct TuningSpace {
  std::string backend;
  std::string family;    // the schedule family: "x86-avx512", "cuda", "cuda-mma", ...
  std::string toolchain; // "Halide 14.0.0", "LLVM 19.1.7": records from another do not apply
  std::vector<ParamSpace> params;
  ScheduleParams defaults;
  std::function<void(const ScheduleParams&)> check;
  // Whole schedules from other generators (Halide's autoschedulers), proposed right after the
  // default.
  std::vector<std::map<std::string, int64_t>> generated;
};

struct CompileResult {
  std::filesystem::path primary;            // the bundle when one was written
  std::vector<std::filesystem::path> files; // everything written, the primary first
};

struct BackendInfo {
  std::string_view name;
  std::string_view description;
  bool available; // built into this attnc
};

std::span<const BackendInfo> backends();

// Throws UsageError for an unknown or unavailable backend or a target it cannot build,
// JobError when building fails.
CompileResult compileBundle(const Spec& spec, const CompileOptions& options);

// The spaces of every built backend that can be tuned for `target` (the reference cannot).
// Throws UsageError for a target no backend knows.
std::vector<TuningSpace> tuningSpaces(const Spec& spec, const std::string& target);

// The MLIR backend's IR after each stage (or after `stage` only), for attnc explain. Throws
// UsageError when this attnc has no MLIR backend or the stage is unknown.
std::string explainStages(const Spec& spec, const CompileOptions& options, const std::string& stage,
                          bool printIrAfterAll);

} // namespace attnc

#endif // ATTNC_COMPILER_BACKENDS_BACKEND_H
