#include "Backends/Halide/HalideBackend.h"

#include "Abi/Manifest.h"
#include "Backends/Halide/AttentionAlgorithm.h"
#include "Backends/Halide/HalideAutoschedule.h"
#include "Backends/Halide/HalideTarget.h"
#include "Backends/Halide/LinearAlgorithm.h"
#include "Link/Toolchain.h"
#include "attnc/attnc.h"
#include "halide/AttentionSchedule.h"

#include <fstream>

namespace attnc {
namespace {

// The entry point bundles call through attnc_kernel_run (HalideKernel.cpp).
constexpr const char* kBundleEntry = "attnc_halide_kernel";

std::string stemFor(const Spec& spec, const std::string& target) {
  std::string stem = bundleStem(spec, "halide");
  return target == "host" ? stem : stem + "_" + target;
}

// A C identifier for the function of ahead-of-time artifacts: attnc_<variant>_<hash>.
std::string functionName(const Spec& spec) {
  return "attnc_" + std::string(variantName(spec.variant)) + "_" + spec.hash().substr(0, 12);
}

class HalideBackend final : public Backend {
public:
  std::string_view name() const override { return "halide"; }
  std::string_view description() const override {
    return "fused flash-style kernels through Halide 14 (CPU; CUDA for sdpa)";
  }
  std::vector<std::string> targets() const override { return halide::halideTargetNames(); }
  std::span<const Coverage> coverage() const override;
  std::optional<TuningSpace> tuningSpace(const Spec& spec,
                                         const std::string& target) const override;
  CompileResult compile(const Spec& spec, const CompileOptions& options) const override;
};

// Every variant, mask, modifier, output and dtype on CPUs. On CUDA the schedule covers sdpa,
// and bf16 is out: LLVM 14's NVPTX code generator (inside Halide 14) aborts on bf16 values.
std::span<const Coverage> HalideBackend::coverage() const {
  static const std::vector<Coverage> rows = [] {
    Coverage cuda = fullCoverage(TargetFamily::Cuda);
    cuda.variants = {Variant::Sdpa};
    cuda.dtypes = {DType::F32, DType::F16};
    cuda.gapReason = "its CUDA schedule covers sdpa, and LLVM 14's NVPTX code generator inside "
                     "Halide 14 aborts on bf16 values";
    return std::vector<Coverage>{fullCoverage(TargetFamily::Cpu), cuda};
  }();
  return rows;
}

} // namespace

std::optional<TuningSpace> HalideBackend::tuningSpace(const Spec& spec,
                                                      const std::string& targetName) const {
  const std::string family = halide::resolveHalideTarget(targetName).family;
  // libHalide14 pins the major version; its LLVM is built in.
  return TuningSpace{"halide",
          family,
          "Halide 14",
          halide::halideTuningParams(family, spec),
          halide::defaultHalideSchedule(family, spec),
          [family, spec](const ScheduleParams& p) { halide::checkHalideSchedule(family, p, spec); },
          halide::halideAutoscheduledCandidates(family, spec)};
}

CompileResult HalideBackend::compile(const Spec& spec, const CompileOptions& options) const {
  halide::HalideTarget target = halide::resolveHalideTarget(options.target);
  const std::set<std::string>& emit = options.emit;
  for (const std::string& kind : emit)
    if (kind != "so" && kind != "a" && kind != "h" && kind != "obj" && kind != "asm" &&
        kind != "stmt" && kind != "ptx" && kind != "part" && kind != "sealed")
      throw UsageError("--emit " + kind +
                       ": the halide backend writes so, a, h, obj, asm, stmt (and ptx for cuda)");
  if (emit.count("ptx") && target.family != "cuda")
    throw UsageError("--emit ptx needs a cuda target (--target cuda-sm_80 or cuda-sm_90)");
  if (emitsKernel(emit) && !target.runsHere)
    throw UsageError("--target " + options.target + " is a cross target (" + target.manifest.arch +
                     "): bundles run where they are built; use --emit " +
                     "with obj, a, h, asm or stmt");
  ScheduleParams params =
      halide::defaultHalideSchedule(target.family, spec)
          .overridden(options.schedule, halide::halideParamSpace(), options.scheduleProvenance);
  halide::checkHalideSchedule(target.family, params, spec);
  const bool cuda = target.family == "cuda";
  const int64_t autoscheduler = params.get("autoscheduler");
  // Each algorithm keeps its Funcs alive in `schedule`, which applies attnc's schedule to them.
  std::vector<Halide::ImageParam> inputs;
  std::vector<Halide::Func> outputs;
  std::function<void()> schedule;
  if (spec.variant == Variant::Linear) {
    if (autoscheduler != 0)
      throw UsageError("schedule: autoscheduler=" + std::to_string(autoscheduler) +
                       " is for the softmax variants; variant=linear has its own schedule");
    auto linear = std::make_shared<halide::LinearAlgorithm>(
        halide::buildLinearAttention(spec, static_cast<int>(params.get("chunk"))));
    inputs = linear->terms->inputs();
    outputs = linear->outputs;
    schedule = [linear, &spec, &params] { halide::scheduleLinearAttention(*linear, spec, params); };
  } else {
    // Gathered key tiles are CPU-only until the CUDA schedule is measured with them.
    auto algorithm = std::make_shared<halide::AttentionAlgorithm>(
        halide::buildAttention(spec, static_cast<int>(params.get("query_tile")),
                               static_cast<int>(params.get("key_block")), !cuda));
    inputs = algorithm->terms->inputs();
    outputs = algorithm->outputs;
    schedule = [algorithm, &spec, &params, cuda] {
      if (cuda)
        halide::scheduleAttentionCuda(*algorithm, spec, params);
      else
        halide::scheduleAttention(*algorithm, spec, params);
    };
  }
  Halide::Pipeline pipeline(outputs);
  if (autoscheduler != 0)
    autoscheduleAttention(pipeline, inputs, outputs, spec, autoscheduler, target.target);
  else
    schedule();
  std::vector<Halide::Argument> arguments(inputs.begin(), inputs.end());

  const std::string stem = stemFor(spec, options.target);
  const std::string function = functionName(spec);
  OutputStaging staging(options.outDir);
  const std::filesystem::path scratch = staging.scratch();
  std::vector<std::string> files;
  try {
    if (emitsKernel(emit)) {
      // The kernel takes a user context (the runtime's call, for the thread pool and errors);
      // the Halide runtime is compiled once beside it and stays private to the bundle.
      Halide::Target kernelTarget = target.target.with_feature(Halide::Target::UserContext)
                                        .with_feature(Halide::Target::NoRuntime);
      pipeline.compile_to_object((scratch / "kernel.o").string(), arguments, kBundleEntry,
                                 kernelTarget);
      Halide::compile_standalone_runtime((scratch / "halide_runtime.o").string(), target.target);
      BundleRequest request;
      if (cuda) {
        // A CUDA bundle keeps its Halide runtime (with the CUDA module) to itself.
        request.manifest = buildManifest(spec, "halide", params.toJson(), target.manifest, 0);
        request.linkInputs = {scratch / "kernel.o", scratch / "halide_runtime.o",
                              findArchive("libattnc_bundle_halide_cuda.a")};
      } else {
        // One Halide runtime per process: the runtime makes the first such bundle's halide_*
        // symbols global, and every later bundle's kernel binds to them.
        request.manifest = buildManifest(spec, "halide", params.toJson(), target.manifest, 0,
                                         {{"shared_runtime", "halide-14"}});
        request.sharedExports = {"halide_*"};
        request.linkInputs = {scratch / "kernel.o", scratch / "halide_runtime.o",
                              findArchive("libattnc_bundle_halide.a")};
        request.runner = "attnc_halide_run";
        request.kernelSymbols = {std::string(kBundleEntry) + "_argv"};
        request.kernelObject = scratch / "kernel.o";
      }
      request.stem = stem;
      request.abiVersion = ATTNC_ABI_VERSION;
      std::vector<std::string> written = writeKernel(request, staging, emit);
      files.insert(files.end(), written.begin(), written.end());
    }
    if (emit.count("a") || emit.count("h")) {
      // A static library with the Halide runtime inside and its C header, for applications
      // that link the kernel ahead of time: int <function>(halide_buffer_t *q, ..., *o).
      pipeline.compile_to_static_library((scratch / stem).string(), arguments, function,
                                         target.target);
      if (emit.count("a"))
        files.push_back(stem + ".a");
      if (emit.count("h"))
        files.push_back(stem + ".h");
    }
    if (emit.count("obj")) {
      pipeline.compile_to_object((scratch / (stem + ".o")).string(), arguments, function,
                                 target.target.with_feature(Halide::Target::NoRuntime));
      files.push_back(stem + ".o");
    }
    if (emit.count("asm")) {
      pipeline.compile_to_assembly((scratch / (stem + ".s")).string(), arguments, function,
                                   target.target);
      files.push_back(stem + ".s");
    }
    if (emit.count("ptx")) {
      // Halide keeps the device code in a buffer of the module ("..._gpu_source_kernels").
      Halide::Module module = pipeline.compile_to_module(arguments, function, target.target);
      std::string ptx;
      for (const Halide::Buffer<>& buffer : module.buffers())
        if (buffer.name().find("gpu_source_kernels") != std::string::npos)
          ptx.append(static_cast<const char*>(buffer.data()), buffer.size_in_bytes());
      while (!ptx.empty() && ptx.back() == '\0')
        ptx.pop_back();
      std::ofstream((scratch / (stem + ".ptx")).string()) << ptx;
      files.push_back(stem + ".ptx");
    }
    if (emit.count("stmt")) {
      pipeline.compile_to_lowered_stmt((scratch / (stem + ".stmt")).string(), arguments,
                                       Halide::StmtOutputFormat::Text, target.target);
      files.push_back(stem + ".stmt");
    }
  } catch (const Halide::Error& e) {
    throw JobError(std::string("Halide failed to compile the kernel: ") + e.what());
  }
  std::vector<std::filesystem::path> written = staging.commit(files);
  return {written.front(), written};
}

const Backend& halideBackend() {
  static const HalideBackend backend;
  return backend;
}

} // namespace attnc
