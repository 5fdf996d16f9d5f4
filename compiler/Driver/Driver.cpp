#include "Driver/Driver.h"

#include "Backends/Reference/ReferenceBackend.h"
#include "Driver/FatBundle.h"
#include "Driver/ShapeDispatch.h"
#if ATTNC_HAS_HALIDE
#include "Backends/Halide/HalideBackend.h"
#endif
#if ATTNC_HAS_MLIR
#include "Backends/MLIR/MlirBackend.h"
#endif

namespace attnc {
namespace {

std::string builtNames() {
  std::string names;
  for (const Backend* b : registeredBackends())
    names += (names.empty() ? "" : ", ") + std::string(b->name());
  return names;
}

// The backend that builds `spec` for options.target, or UsageError with the reason it cannot.
const Backend& checkedBackend(const Spec& spec, const CompileOptions& options) {
  const Backend& backend = options.backend == "auto" ? fastestBackendFor(spec, options.target)
                                                     : backendNamed(options.backend);
  if (std::optional<std::string> reason = backend.unsupported(spec, options.target))
    throw UsageError(*reason);
  return backend;
}

} // namespace

std::span<const Backend* const> registeredBackends() {
  static const std::vector<const Backend*> all = {
#if ATTNC_HAS_MLIR
    &mlirBackend(),
#endif
#if ATTNC_HAS_HALIDE
    &halideBackend(),
#endif
    &referenceBackend(),
  };
  return all;
}

const Backend& backendNamed(const std::string& name) {
  for (const Backend* b : registeredBackends())
    if (b->name() == name)
      return *b;
  throw UsageError("--backend " + name + ": unknown backend; this attnc has " + builtNames() +
                   " and auto");
}

const Backend& fastestBackendFor(const Spec& spec, const Target& target) {
  // The first fused backend that covers the spec, in registration order (the faster first),
  // unless it visits keys a mask of the spec masks, or runs the variant slower, where a later one
  // does not.
  std::string reasons;
  const Backend* deferring = nullptr;
  for (const Backend* b : registeredBackends()) {
    if (b == &referenceBackend())
      continue;
    std::optional<std::string> reason = b->unsupported(spec, target);
    if (reason) {
      reasons += "; " + *reason;
      continue;
    }
    if (!b->defersToAnother(spec, target))
      return *b;
    deferring = deferring ? deferring : b;
  }
  if (deferring)
    return *deferring;
  throw UsageError("--backend auto: no fused backend of this attnc builds this spec for --target " +
                   target.name + reasons + " (--backend reference builds every spec for the host)");
}

CompileRequest::Kind CompileRequest::kind() const {
  if (kernels.size() > 1 || emit.count(Emit::Lib))
    return Kind::Fat;
  return kernels.front().shapeSchedules.size() > 1 ? Kind::ShapeDispatch : Kind::Single;
}

CompileResult compileBundle(const Spec& spec, const CompileRequest& request) {
  if (request.kernels.empty())
    throw UsageError("a compile names at least one target");
  if (request.kind() == CompileRequest::Kind::Fat)
    return compileFatBundle(spec, request);
  return compileKernel(spec, request.kernels.front(), request.emit, request.outDir);
}

CompileResult compileKernel(const Spec& spec, const KernelRequest& kernel, const EmitSet& emit,
                            const std::filesystem::path& outDir) {
  if (std::vector<ShapeSchedule> shapes = decodingSchedules(spec, kernel, emit); !shapes.empty()) {
    KernelRequest withDecode = kernel;
    withDecode.shapeSchedules = std::move(shapes);
    return compileShapeDispatch(spec, withDecode, emit, outDir);
  }
  if (kernel.shapeSchedules.size() > 1)
    return compileShapeDispatch(spec, kernel, emit, outDir);
  CompileOptions options{kernel.backend,  kernel.target,
                         outDir,          emit,
                         kernel.schedule, kernel.scheduleProvenance,
                         /*preparedSpec=*/std::nullopt};
  if (!spec.preparedByRuntime())
    return checkedBackend(spec, options).compile(spec, options);
  // The runtime runs the kernel once per run of a ragged batch's sequences with the same number
  // of rows, after writing the new rows into the cache on the host; the capability rows judge
  // the spec itself (kv_append takes CPU rows only).
  options.preparedSpec = spec;
  const Backend& backend = checkedBackend(spec, options);
  return backend.compile(spec.kernelSpec(), options);
}

std::vector<TuningSpace> tuningSpaces(const Spec& spec, const Target& target) {
  std::vector<TuningSpace> spaces;
  for (const Backend* b : registeredBackends())
    if (std::optional<TuningSpace> space = b->tuningSpace(spec, target))
      spaces.push_back(std::move(*space));
  return spaces;
}

std::string explainStages(const Spec& spec, const CompileOptions& options, const std::string& stage,
                          bool printIrAfterAll) {
  if (options.backend == "mlir" && !ATTNC_HAS_MLIR)
    throw UsageError("explain shows the MLIR pipeline; this attnc was built without it");
  // The kernel the runtime prepares calls for.
  const Spec kernelSpec = spec.kernelSpec();
  return checkedBackend(kernelSpec, options).explain(kernelSpec, options, stage, printIrAfterAll);
}

} // namespace attnc
