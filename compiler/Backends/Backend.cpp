#include "Backends/Backend.h"

#include "Backends/FatBundle.h"
#include "Backends/Reference/ReferenceBackend.h"
#include "Backends/ShapeDispatch.h"
#if ATTNC_HAS_HALIDE
#include "Backends/Halide/HalideBackend.h"
#endif
#if ATTNC_HAS_MLIR
#include "Backends/MLIR/MlirBackend.h"
#endif

#include <array>

namespace attnc {
namespace {

constexpr std::array kBackends{
    BackendInfo{"reference", "the f64 reference behind the kernel ABI (exact, slow)", true},
    BackendInfo{"halide", "fused flash-style CPU kernels through Halide 14", ATTNC_HAS_HALIDE != 0},
    BackendInfo{"mlir", "the attn dialect lowered through MLIR 19 to vectorised code",
                ATTNC_HAS_MLIR != 0},
};

std::string availableNames() {
  std::string names;
  for (const BackendInfo& b : kBackends)
    if (b.available)
      names += (names.empty() ? "" : ", ") + std::string(b.name);
  return names;
}

} // namespace

std::span<const BackendInfo> backends() {
  return kBackends;
}

CompileResult compileBundle(const Spec& spec, const CompileOptions& options) {
  if (options.targets.size() > 1 || options.emit.count("lib"))
    return compileFatBundle(spec, options);
  if (options.shapeSchedules.size() > 1)
    return compileShapeDispatch(spec, options);
  for (const BackendInfo& b : kBackends) {
    if (b.name != options.backend)
      continue;
    if (!b.available)
      throw UsageError("--backend " + options.backend + ": this attnc does not have the " +
                       options.backend + " backend yet; available: " + availableNames());
#if ATTNC_HAS_HALIDE
    if (b.name == "halide")
      return compileHalide(spec, options);
#endif
#if ATTNC_HAS_MLIR
    if (b.name == "mlir")
      return compileMlir(spec, options);
#endif
    return compileReferenceBundle(spec, options);
  }
  std::string all;
  for (const BackendInfo& b : kBackends)
    all += (all.empty() ? "" : ", ") + std::string(b.name);
  throw UsageError("--backend " + options.backend + ": unknown backend; known: " + all);
}

std::vector<TuningSpace> tuningSpaces(const Spec& spec, const std::string& target) {
  std::vector<TuningSpace> spaces;
#if ATTNC_HAS_HALIDE
  spaces.push_back(halideTuningSpace(spec, target));
#endif
#if ATTNC_HAS_MLIR
  spaces.push_back(mlirTuningSpace(spec, target));
#endif
  return spaces;
}

std::string explainStages(const Spec& spec, const CompileOptions& options, const std::string& stage,
                          bool printIrAfterAll) {
#if ATTNC_HAS_MLIR
  return explainMlir(spec, options, stage, printIrAfterAll);
#else
  throw UsageError("explain shows the MLIR pipeline; this attnc was built without it");
#endif
}

} // namespace attnc
