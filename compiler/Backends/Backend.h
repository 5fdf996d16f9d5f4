// The interface every code generator implements: its name, targets, capability table rows
// (Coverage.h), tuning space, explained stages and compile. Each backend registers one instance
// with the driver (Driver/Driver.h), which is all the tools call.
#ifndef ATTNC_COMPILER_BACKENDS_BACKEND_H
#define ATTNC_COMPILER_BACKENDS_BACKEND_H

#include "Backends/Coverage.h"
#include "Link/BundleWriter.h"
#include "ScheduleParams.h"
#include "Spec/Spec.h"

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace attnc {

struct CompileOptions {
  // A backend's name, or "auto": the tuned record's, else the fastest that covers the spec.
  std::string backend = "auto";
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

class Backend {
public:
  virtual ~Backend() = default;

  virtual std::string_view name() const = 0;
  virtual std::string_view description() const = 0;
  // The target names it builds for, "host" first.
  virtual std::vector<std::string> targets() const = 0;
  // Its rows of the capability table; it builds for no family without a row.
  virtual std::span<const Coverage> coverage() const = 0;
  // What `attnc tune` searches on `target`; nullopt for a backend without schedule parameters.
  // Throws UsageError for a target it does not know.
  virtual std::optional<TuningSpace> tuningSpace(const Spec& spec,
                                                 const std::string& target) const = 0;
  // The spec and schedule, then the IR after each stage (after `stage` only, when not empty),
  // for attnc explain. Throws UsageError for an unknown stage, or when it has no stages.
  virtual std::string explain(const Spec& spec, const CompileOptions& options,
                              const std::string& stage, bool printIrAfterAll) const;
  // Writes options.emit's artifacts for one target (no fat or shape-dispatch bundles: the
  // driver makes those of several compiles). Throws UsageError for what it refuses, JobError
  // when building fails.
  virtual CompileResult compile(const Spec& spec, const CompileOptions& options) const = 0;

  // Why it cannot build `spec` for `target` (an unknown target, or the table's first gap, with
  // the row and the reason), or nullopt when it can.
  std::optional<std::string> unsupported(const Spec& spec, const std::string& target) const;
};

} // namespace attnc

#endif // ATTNC_COMPILER_BACKENDS_BACKEND_H
