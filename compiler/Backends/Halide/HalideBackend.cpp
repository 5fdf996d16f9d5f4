#include "Backends/Halide/HalideBackend.h"

#include "Abi/Manifest.h"
#include "Backends/Halide/AttentionAlgorithm.h"
#include "Backends/Halide/HalideAutoschedule.h"
#include "Backends/Halide/HalideTarget.h"
#include "Backends/Halide/LinearAlgorithm.h"
#include "Link/Toolchain.h"
#include "Support/Files.h"
#include "attnc/attnc.h"
#include "halide/AttentionSchedule.h"

#include <array>
#include <map>
#include <memory>

namespace attnc {
namespace {

// The entry point bundles call through attnc_kernel_run (HalideKernel.cpp).
constexpr const char* kBundleEntry = "attnc_halide_kernel";

// The files Halide writes into a directory, each first a MemoryFile behind a symlink of its
// name (Halide opens it as it would the file, and its C header's include guard stays the
// name's): Halide's C++ streams ignore write errors, so a full disk would leave a cut file, and
// LLVM's end the process on them. commit() writes each one with writeFile, which checks.
class HalideFiles {
public:
  explicit HalideFiles(std::filesystem::path dir) : dir_(std::move(dir)) {}

  // The path to give Halide for the file `name`.
  std::string at(const std::string& name) {
    auto file = std::make_unique<MemoryFile>(name);
    std::error_code error;
    std::filesystem::create_symlink(file->path(), dir_ / name, error);
    if (error)
      throwSystemError("cannot write " + (dir_ / name).string(), error.value());
    files_.emplace_back(name, std::move(file));
    return (dir_ / name).string();
  }

  // Replaces each symlink by the file Halide wrote through it.
  void commit() {
    for (const auto& [name, file] : files_) {
      std::error_code error;
      std::filesystem::remove(dir_ / name, error); // else writeFile would write through it
      if (error)
        throwSystemError("cannot write " + (dir_ / name).string(), error.value());
      writeFile(dir_ / name, file->contents());
    }
  }

private:
  std::filesystem::path dir_;
  std::vector<std::pair<std::string, std::unique_ptr<MemoryFile>>> files_;
};

std::string stemFor(const Spec& spec, const Target& target) {
  std::string stem = bundleStem(spec, "halide");
  return target.name == "host" ? stem : stem + "_" + target.name;
}

// A C identifier for the function of ahead-of-time artifacts: attnc_<variant>_<hash>.
std::string functionName(const Spec& spec) {
  return "attnc_" + std::string(variantName(spec.variant)) + "_" + spec.hash().substr(0, 12);
}

// The artifacts Halide writes itself through compile_to: the kind, Halide's name for it, its
// file's suffix, whether it leaves the Halide runtime out (an object to link beside another
// that has it), and whether its function gets the ahead-of-time name (the lowered statement
// keeps the name Halide gives the pipeline). Kinds asked the same way share one compile_to.
struct HalideArtifact {
  Emit emit;
  Halide::OutputFileType output;
  const char* suffix;
  bool withoutRuntime;
  bool named;
};
constexpr HalideArtifact kArtifacts[] = {
    // A static library with the Halide runtime inside and its C header, for applications
    // that link the kernel ahead of time: int <function>(halide_buffer_t *q, ..., *o).
    {Emit::HalideLibrary, Halide::OutputFileType::static_library, ".a", false, true},
    {Emit::HalideHeader, Halide::OutputFileType::c_header, ".h", false, true},
    {Emit::Object, Halide::OutputFileType::object, ".o", true, true},
    {Emit::Assembly, Halide::OutputFileType::assembly, ".s", false, true},
    {Emit::Stmt, Halide::OutputFileType::stmt, ".stmt", false, false},
};

// The order compile lists the files besides the bundle in (its first is the primary one).
constexpr Emit kFileOrder[] = {Emit::HalideLibrary, Emit::HalideHeader, Emit::Object,
                               Emit::Assembly,      Emit::Ptx,          Emit::Stmt};

// The pipeline of a spec under its schedule, and the arguments of its function.
struct BuiltPipeline {
  Halide::Pipeline pipeline;
  std::vector<Halide::Argument> arguments;
  ScheduleParams params;
};

class HalideBackend final : public Backend {
public:
  std::string_view name() const override { return "halide"; }
  std::string_view description() const override {
    return "fused flash-style kernels through Halide 14 (CPU; CUDA for sdpa)";
  }
  std::vector<std::string> targets() const override { return targetNames(); }
  std::span<const Coverage> coverage() const override;
  std::optional<TuningSpace> tuningSpace(const Spec& spec, const Target& target) const override;
  CompileResult compile(const Spec& spec, const CompileOptions& options) const override;
};

// Why neither row builds a backward, nor what only a backward reads (firstGap names
// backward=true before a backward's other outputs).
constexpr std::array<Coverage::GapReason, 2> kBackwardGaps = {{
    {"backward=true", "a Halide backward would recompute dS for dQ or hold it whole, slower "
                      "than the mlir backend's, which builds it: use --backend mlir"},
    {"save_projections=true", "only a backward reads them, and the mlir backend builds both: "
                              "use --backend mlir"},
}};

// Every variant, mask, modifier, output and dtype on CPUs but fp8 E4M3 caches (Halide 14 has no
// 8-bit float type; the MLIR backend decodes them) and the backward entry. On CUDA the schedule
// covers sdpa, and bf16 is out: LLVM 14's NVPTX code generator (inside Halide 14) aborts on bf16
// values.
// The backward is refused by decision: dS feeds two reductions in opposite loop orders (dK, dV
// over the queries of a key block, dQ over the keys of a query row). The MLIR kernel computes
// each dS tile once and adds it into both, dQ into a per-chunk copy summed in order. A Halide
// Func cannot be updated from inside another Func's reduction, so Halide 14 would recompute the
// scores for dQ (seven products of T^2 d against five) or hold them whole (T x T). Either way it
// would stay behind the MLIR kernel, which its forward already trails on CPUs
// (docs/benchmarks.md).
std::span<const Coverage> HalideBackend::coverage() const {
  static const std::vector<Coverage> rows = [] {
    Coverage cuda = fullCoverage(Device::Cuda);
    cuda.variants = {Variant::Sdpa};
    std::erase(cuda.outputs, Output::Backward);
    std::erase(cuda.outputs, Output::AuxGradients);
    std::erase(cuda.outputs, Output::SavedProjections);
    cuda.dtypes = {DType::F32, DType::F16};
    std::erase(cuda.modifiers, Modifier::KvAppend);
    std::erase(cuda.modifiers, Modifier::Fp8KvCache);
    cuda.gapReasons = {
        {"variant=", "its CUDA schedule covers sdpa"},
        {"dtype=bf16", "LLVM 14's NVPTX code generator inside Halide 14 aborts on bf16 values"},
        {"kv_dtype=fp8_e4m3", "Halide 14 has no 8-bit float type"},
        {"kv_append", "the runtime writes kv_append's rows into host caches only"}};
    cuda.gapReasons.insert(cuda.gapReasons.end(), kBackwardGaps.begin(), kBackwardGaps.end());
    // Query rows fill the vector lanes: a one-row step uses 1/16 of each AVX-512 vector (12.8
    // ms against MLIR's 2.0 at H 8 d 128 f16 Tk 16k, docs/benchmarks.md "Decode"), so
    // --backend auto takes MLIR's decode kernel wherever it covers.
    Coverage cpu = fullCoverage(Device::Cpu);
    std::erase(cpu.modifiers, Modifier::Fp8KvCache);
    std::erase(cpu.outputs, Output::Backward);
    std::erase(cpu.outputs, Output::AuxGradients);
    std::erase(cpu.outputs, Output::SavedProjections);
    cpu.gapReasons = {
        {"kv_dtype=fp8_e4m3", "Halide 14 has no 8-bit float type; the mlir backend decodes them"}};
    cpu.gapReasons.insert(cpu.gapReasons.end(), kBackwardGaps.begin(), kBackwardGaps.end());
    cpu.decode = "the prefill kernel, query rows in vector lanes (no decode kernel: slow for "
                 "Tq <= 16; auto prefers MLIR's)";
    cuda.decode = "the prefill kernel (no decode kernel)";
    // Halide 14's x86 code generator knows neither AMX tiles nor AVX512-BF16 dot products.
    cpu.products = "widened to f32 (Halide 14 emits no AMX or AVX512-BF16 products)";
    cuda.products = "widened to f32";
    return std::vector<Coverage>{cpu, cuda};
  }();
  return rows;
}

} // namespace

std::optional<TuningSpace> HalideBackend::tuningSpace(const Spec& spec,
                                                      const Target& target) const {
  const ScheduleFamily family = halide::resolveHalideTarget(target).family;
  // libHalide14 pins the major version; its LLVM is built in.
  return TuningSpace{"halide",
          family,
          "Halide 14",
          halide::halideTuningParams(family, spec),
          halide::defaultHalideSchedule(family, spec),
          [family, spec](const ScheduleParams& p) { halide::checkHalideSchedule(family, p, spec); },
          halide::halideAutoscheduledCandidates(family, spec)};
}

namespace {

// Throws UsageError for a kind of `emit` this backend does not write for `target`.
void checkEmit(const EmitSet& emit, const halide::HalideTarget& target) {
  for (Emit kind : emit)
    if (kind == Emit::Lib || kind == Emit::Mlir || kind == Emit::Llvm)
      throw UsageError("--emit " + std::string(emitName(kind)) +
                       ": the halide backend writes so, a, h, obj, asm, stmt (and ptx for cuda)");
  if (emit.count(Emit::Ptx) && !target.needs.target.isCuda())
    throw UsageError("--emit ptx needs a cuda target (--target cuda-sm_80 or cuda-sm_90)");
  if (emitsKernel(emit) && !target.runsHere)
    throw UsageError("--target " + target.needs.target.name + " is a cross target (" +
                     std::string(architectureName(target.needs.target.architecture)) +
                     "): bundles run where they are built; use --emit with obj, a, h, asm or "
                     "stmt");
}

// The spec's algorithm (linear, or the online softmax) under attnc's schedule for the target,
// or under one of Halide's autoschedulers.
BuiltPipeline buildPipeline(const Spec& spec, const CompileOptions& options,
                            const halide::HalideTarget& target) {
  ScheduleParams params =
      halide::defaultHalideSchedule(target.family, spec)
          .overridden(options.schedule, halide::halideParamSpace(), options.scheduleProvenance);
  halide::checkHalideSchedule(target.family, params, spec);
  const bool cuda = target.needs.target.isCuda();
  const int64_t autoscheduler = params.get("autoscheduler");
  // Each algorithm's Funcs stay alive in the pipeline, which refers to them all.
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
  return {pipeline, std::vector<Halide::Argument>(inputs.begin(), inputs.end()), params};
}

// The bundle (or the part or sealed kernel the driver asked for): the kernel object, which
// takes a user context (the runtime's call, for the thread pool and errors), and the Halide
// runtime compiled beside it, private to the bundle.
std::vector<std::string> writeBundleKernel(BuiltPipeline& built, const Spec& spec,
                                           const halide::HalideTarget& target,
                                           const EmitSet& emit, const std::string& stem,
                                           const OutputStaging& staging) {
  const std::filesystem::path& scratch = staging.scratch();
  const Halide::Target kernelTarget = target.target.with_feature(Halide::Target::UserContext)
                                          .with_feature(Halide::Target::NoRuntime);
  HalideFiles objects(scratch);
  built.pipeline.compile_to_object(objects.at("kernel.o"), built.arguments, kBundleEntry,
                                   kernelTarget);
  Halide::compile_standalone_runtime(objects.at("halide_runtime.o"), target.target);
  objects.commit();
  BundleRequest request;
  if (target.needs.target.isCuda()) {
    // A CUDA bundle keeps its Halide runtime (with the CUDA module) to itself.
    request.manifest = buildManifest(spec, "halide", built.params.toJson(), target.needs);
    request.linkInputs = {scratch / "kernel.o", scratch / "halide_runtime.o",
                          findArchive("libattnc_bundle_halide_cuda.a")};
  } else {
    // One Halide runtime per process: the runtime makes the first such bundle's halide_*
    // symbols global, and every later bundle's kernel binds to them.
    request.manifest = buildManifest(spec, "halide", built.params.toJson(), target.needs,
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
  return writeKernel(request, staging, emit);
}

// kArtifacts' kinds that `emit` asks for, one compile_to for the kinds asked the same way;
// the file of each kind written. A static library is written in place, not through
// HalideFiles: LLVM writes it to a temporary file that it renames.
std::map<Emit, std::string> writeHalideArtifacts(BuiltPipeline& built, const Spec& spec,
                                                 const halide::HalideTarget& target,
                                                 const EmitSet& emit, const std::string& stem,
                                                 const std::filesystem::path& scratch) {
  std::map<std::pair<bool, bool>, std::map<Halide::OutputFileType, std::string>> calls;
  std::map<Emit, std::string> files;
  HalideFiles written(scratch);
  for (const HalideArtifact& a : kArtifacts)
    if (emit.count(a.emit)) {
      const std::string name = stem + a.suffix;
      calls[{a.withoutRuntime, a.named}][a.output] =
          a.emit == Emit::HalideLibrary ? (scratch / name).string() : written.at(name);
      files[a.emit] = name;
    }
  for (const auto& [how, outputs] : calls) {
    const auto [withoutRuntime, named] = how;
    built.pipeline.compile_to(
        outputs, built.arguments, named ? functionName(spec) : "",
        withoutRuntime ? target.target.with_feature(Halide::Target::NoRuntime) : target.target);
  }
  written.commit();
  return files;
}

// The GPU code, which Halide keeps in a buffer of the module ("..._gpu_source_kernels").
std::string writePtx(BuiltPipeline& built, const Spec& spec, const halide::HalideTarget& target,
                     const std::string& stem, const std::filesystem::path& scratch) {
  Halide::Module module =
      built.pipeline.compile_to_module(built.arguments, functionName(spec), target.target);
  std::string ptx;
  for (const Halide::Buffer<>& buffer : module.buffers())
    if (buffer.name().find("gpu_source_kernels") != std::string::npos)
      ptx.append(static_cast<const char*>(buffer.data()), buffer.size_in_bytes());
  while (!ptx.empty() && ptx.back() == '\0')
    ptx.pop_back();
  writeFile(scratch / (stem + ".ptx"), ptx);
  return stem + ".ptx";
}

} // namespace

CompileResult HalideBackend::compile(const Spec& spec, const CompileOptions& options) const {
  const halide::HalideTarget target = halide::resolveHalideTarget(options.target);
  checkEmit(options.emit, target);
  BuiltPipeline built = buildPipeline(spec, options, target);
  const std::string stem = stemFor(options.describedSpec(spec), options.target);
  OutputStaging staging(options.outDir);
  std::vector<std::string> files;
  try {
    if (emitsKernel(options.emit))
      files = writeBundleKernel(built, options.describedSpec(spec), target, options.emit, stem,
                                staging);
    std::map<Emit, std::string> artifacts =
        writeHalideArtifacts(built, spec, target, options.emit, stem, staging.scratch());
    if (options.emit.count(Emit::Ptx))
      artifacts[Emit::Ptx] = writePtx(built, spec, target, stem, staging.scratch());
    for (Emit kind : kFileOrder)
      if (artifacts.count(kind))
        files.push_back(artifacts.at(kind));
  } catch (const Halide::Error& e) {
    const std::string message = std::string("Halide failed to compile the kernel: ") + e.what();
    if (mentionsEnvironmentFailure(e.what())) // a full disk under its static library, say
      throw EnvironmentError(message);
    throw JobError(message);
  }
  std::vector<std::filesystem::path> written = staging.commit(files);
  return {written.front(), written};
}

const Backend& halideBackend() {
  static const HalideBackend backend;
  return backend;
}

} // namespace attnc
