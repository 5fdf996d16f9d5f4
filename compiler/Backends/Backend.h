// The interface every code generator implements: its name, targets, capability table rows
// (Coverage.h), tuning space, explained stages and compile. Each backend registers one instance
// with the driver (Driver/Driver.h), which is all the tools call.
#ifndef ATTNC_COMPILER_BACKENDS_BACKEND_H
#define ATTNC_COMPILER_BACKENDS_BACKEND_H

#include "Abi/Target.h"
#include "Backends/Coverage.h"
#include "Link/BundleWriter.h"
#include "Link/Emit.h"
#include "ScheduleFamily.h"
#include "ScheduleParams.h"
#include "Spec/Spec.h"

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace attnc {

// One kernel for one target, as the driver asks a backend for it.
struct CompileOptions {
  // A backend's name, or "auto": the fastest that covers the spec (fastestBackendFor).
  std::string backend = "auto";
  Target target = parseTarget("host");
  std::filesystem::path outDir;
  // Artifacts to write; backends refuse kinds they cannot produce (lib and the fat and
  // shape-dispatch bundles are the driver's: it asks backends for parts and sealed kernels).
  EmitSet emit = {Emit::So};
  // Schedule parameters to use instead of the target's defaults (checked against the space).
  std::map<std::string, int64_t> schedule;
  // Where those come from, for the manifest (a tuning record); empty: the command line.
  std::string scheduleProvenance;
  // The spec whose calls the runtime prepares (a ragged batch, new rows for the cache) when the
  // kernel's is its kernelSpec(): the bundle's name and manifest describe it, and the runtime
  // turns each call of the bundle into the kernel's. Empty otherwise.
  std::optional<Spec> preparedSpec;
  // The spec the bundle's name and manifest describe.
  const Spec& describedSpec(const Spec& kernelSpec) const {
    return preparedSpec ? *preparedSpec : kernelSpec;
  }
};

// What `attnc tune` searches for one backend on one target: the tunable parameters with their
// choices (the others stay at the default), the default, and the backend's own check of a
// combination, which throws UsageError naming the clash as compile would.
struct TuningSpace {
  std::string backend;
  ScheduleFamily family; // the schedule family (scheduleFamilyName names it)
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
  // The targets it builds for (Abi/Target.h's names), "host" first.
  virtual std::vector<std::string> targets() const = 0;
  // Its rows of the capability table; it builds for no family without a row.
  virtual std::span<const Coverage> coverage() const = 0;
  // What `attnc tune` searches on `target`; nullopt for a backend without schedule parameters.
  // Throws UsageError for a target it does not know.
  virtual std::optional<TuningSpace> tuningSpace(const Spec& spec,
                                                 const Target& target) const = 0;
  // The spec and schedule, then the IR after each stage (after `stage` only, when not empty),
  // for attnc explain. Throws UsageError for an unknown stage, or when it has no stages.
  virtual std::string explain(const Spec& spec, const CompileOptions& options,
                              const std::string& stage, bool printIrAfterAll) const;
  // Writes options.emit's artifacts for one target (no fat or shape-dispatch bundles: the
  // driver makes those of several compiles). Throws UsageError for what it refuses, JobError
  // when building fails.
  virtual CompileResult compile(const Spec& spec, const CompileOptions& options) const = 0;
  // The schedule parameters that make its decode kernel for `spec` on `target` (few query
  // rows against many keys: vectors along keys, a GQA group per task, keys split over tasks),
  // or nullopt when it has none. The driver puts it beside the prefill kernel in one bundle.
  virtual std::optional<std::map<std::string, int64_t>> decodeSchedule(const Spec& spec,
                                                                       const Target& target) const {
    return std::nullopt;
  }

  // Why it cannot build `spec` for `target` (an unknown target, or the table's first gap, with
  // the row and the reason), or nullopt when it can.
  std::optional<std::string> unsupported(const Spec& spec, const Target& target) const;
  // Whether the row covering `spec` on target's device leaves it to another backend that
  // covers it (Coverage::elementwiseMasks); false when no row covers it.
  bool defersToAnother(const Spec& spec, const Target& target) const;
};

} // namespace attnc

#endif // ATTNC_COMPILER_BACKENDS_BACKEND_H
