#include "Backends/MLIR/MlirBackend.h"

#include "Abi/Arguments.h"
#include "Abi/Manifest.h"
#include "Backends/MLIR/MlirPipeline.h"
#include "Backends/MLIR/MlirTarget.h"
#include "Backends/MLIR/SpecToAttn.h"
#include "Link/Toolchain.h"
#include "Support/Errors.h"
#include "Support/Files.h"
#include "attnc/attnc.h"
#include "bundle/ShapeContract.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "transform/TransformSchedule.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"

namespace attnc {
namespace {

std::string stemFor(const Spec& spec, const Target& target) {
  std::string stem = bundleStem(spec, "mlir");
  return target.name == "host" ? stem : stem + "_" + target.name;
}

ScheduleParams scheduleFor(const mlirbackend::MlirTarget& target, const Spec& spec,
                           const CompileOptions& options) {
  const ScheduleFamily family = mlirschedule::scheduleFamily(target.family, spec);
  ScheduleParams params = mlirschedule::defaultMlirSchedule(family, spec)
                              .overridden(options.schedule, mlirschedule::mlirParamSpace(family),
                                          options.scheduleProvenance);
  mlirschedule::checkMlirSchedule(family, params, spec);
  return params;
}

mlirbackend::PipelineOptions pipelineFor(const mlirbackend::MlirTarget& target, const Spec& spec) {
  mlirbackend::PipelineOptions options;
  options.family = mlirschedule::scheduleFamily(target.family, spec);
  options.gpuChip = target.gpuChip;
  options.ptxFeatures = target.ptxFeatures;
  return options;
}

// The PTX that gpu-module-to-binary embedded (format isa), or "" when there is none.
std::string embeddedPtx(mlir::ModuleOp module) {
  std::string ptx;
  module.walk([&](mlir::gpu::BinaryOp binary) {
    for (mlir::Attribute object : binary.getObjects())
      ptx += mlir::cast<mlir::gpu::ObjectAttr>(object).getObject().getValue().str();
  });
  // The embedded copy ends in the NUL the driver's JIT needs; a .ptx file does not.
  while (!ptx.empty() && ptx.back() == '\0')
    ptx.pop_back();
  return ptx;
}

// The kernel's shape contract (runtime/bundle/ShapeContract.h) as the NUL-terminated string
// kShapeContractSymbol, which the bundle's entry checks every call against.
// A backward=true spec's bundle also checks its backward calls against the backward
// arguments' contract (attnc_mlir_backward_shapes, MlirBackwardKernelEntry.cpp).
void embedShapeContracts(llvm::Module& module, const Spec& spec) {
  auto embed = [&](const std::vector<Argument>& args, const char* symbol) {
    llvm::Constant* text =
        llvm::ConstantDataArray::getString(module.getContext(), shapeContract(args));
    new llvm::GlobalVariable(module, text->getType(), /*isConstant=*/true,
                             llvm::GlobalValue::ExternalLinkage, text, symbol);
  };
  embed(kernelArguments(spec), kShapeContractSymbol);
  if (spec.backward)
    embed(backwardArguments(spec), kBackwardShapeContractSymbol);
}

std::string print(mlir::ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os);
  return text;
}

class MlirBackend final : public Backend {
public:
  std::string_view name() const override { return "mlir"; }
  std::string_view description() const override {
    return "the attn dialect lowered through MLIR 19 to vectorised CPU code and CUDA";
  }
  std::vector<std::string> targets() const override { return targetNames(); }
  std::span<const Coverage> coverage() const override;
  std::optional<TuningSpace> tuningSpace(const Spec& spec, const Target& target) const override;
  std::string explain(const Spec& spec, const CompileOptions& options, const std::string& stage,
                      bool printIrAfterAll) const override;
  CompileResult compile(const Spec& spec, const CompileOptions& options) const override;
  // CPU targets: the decode kernel of schedules/transform/cpu-decode.mlir, with key blocks of
  // 256 and splits of 2048 keys (H 32/8 and 8, d 128, f16, Tk 16384 on the 2-core EPYC: 1.1-1.3x
  // as fast as blocks of 128 and splits of 512; docs/benchmarks.md, "Decode"); decode_rows is
  // the family's default.
  std::optional<std::map<std::string, int64_t>> decodeSchedule(const Spec& spec,
                                                               const Target& target) const override {
    if (target.isCuda() || spec.variant != Variant::Sdpa || spec.backward ||
        unsupported(spec, target))
      return std::nullopt;
    return std::map<std::string, int64_t>{{"decode", 1}, {"key_block", 256}, {"split_keys", 2048}};
  }
};

// What attn.attention expresses (SpecToAttn.cpp), the same on CPUs and CUDA: sdpa with GQA and
// d_v != d_k; every built-in mask (causal, padding, window, tensor, global, strided, dilated,
// block_sparse, BigBird) with mask_mod as the mask expression; ALiBi, softcap and bias with
// score_mod as the score expression; dropout (its factor as an expression region); attention
// sinks (folded into each row's state by online_finalize and the split merges); lse, and
// the weights (a second pass over the keys in a phase of its own, recomputing the scores).
// The tile classifier bounds strided's and dilated's residue classes by their span only, so
// their kernels test every key of it (Halide's gather each class into dense tiles). On CPUs it
// attends a key block from its first to its last chunk of 16 keys the mask can keep, with query
// tiles inside one row block of block_sparse or BigBird (their draws evaluated per chunk): dead
// layout blocks of 64 keys or more are skipped, smaller ones between live ones in a block of
// 128 keys attended masked, and a block no multiple of the vector width (8, 24, 40 on AVX-512)
// leaves tiles straddling row blocks, whose draws are drawn per score; at blocks of 16, 32 and
// 64 these kernels ran 0.99-3.6x as fast as Halide's (docs/benchmarks.md), so only strided and
// dilated are listed as visiting masked keys there. The tensor-core lowering's key blocks are not classified so (CUDA lists all four).
std::span<const Coverage> MlirBackend::coverage() const {
  static const std::vector<Coverage> rows = [] {
    std::vector<Coverage> rows;
    for (Device device : {Device::Cpu, Device::Cuda}) {
      std::vector<Modifier> modifiers = {
          Modifier::Alibi, Modifier::Softcap,  Modifier::Bias,  Modifier::Rope,
          Modifier::Dropout, Modifier::ScoreMod, Modifier::MaskMod, Modifier::Sinks,
          Modifier::ContiguousKvCache, Modifier::PagedKvCache, Modifier::Int8KvCache,
          Modifier::Fp8KvCache};
      std::vector<Output> outputs = {Output::O, Output::Lse, Output::Weights};
      if (device == Device::Cpu) { // the runtime writes the new rows into host caches only
        modifiers.push_back(Modifier::KvAppend);
        outputs.push_back(Output::SavedProjections); // f32 tensors: the CPU's workspace
      }
      std::vector<Coverage::GapReason> gaps;
      if (device == Device::Cuda)
        gaps = {{"kv_append", "the runtime writes kv_append's rows into host caches only"},
                {"save_projections=true", "save_projections returns mha's heads as f32 "
                                          "tensors, where tensor cores compute f16 and bf16 "
                                          "heads"}};
      rows.push_back({device,
                      {Variant::Sdpa, Variant::Mha, Variant::Additive, Variant::Bilinear,
                       Variant::Linear, Variant::Linformer},
                      {MaskKind::Causal, MaskKind::Padding, MaskKind::Window, MaskKind::Tensor,
                       MaskKind::Global, MaskKind::Strided, MaskKind::Dilated,
                       MaskKind::BlockSparse, MaskKind::BigBird},
                      modifiers,
                      outputs,
                      {DType::F32, DType::F16, DType::BF16},
                      device == Device::Cpu
                          ? std::vector<MaskKind>{MaskKind::Strided, MaskKind::Dilated}
                          : std::vector<MaskKind>{MaskKind::Strided, MaskKind::Dilated,
                                                  MaskKind::BlockSparse, MaskKind::BigBird},
                      gaps,
                      device == Device::Cpu
                          ? "a decode kernel beside the prefill one (LowerDecode: a GQA group's "
                            "rows in one task, keys split over tasks and merged by their LSE)"
                          : "for Tq <= 16 (tensor cores, f16 and bf16) tiles of a GQA group's "
                            "heads in the same kernel, pages and quantized rows read in the key "
                            "loop, keys split over thread blocks and merged by their LSE; the "
                            "SIMT path runs the prefill kernel",
                      device == Device::Cpu
                          ? "bf16 prefill on AMX tiles (tdpbf16ps) where the target has them "
                            "(schedule family x86-amx); prefill and decode as AVX512-BF16 dot "
                            "products (vdpbf16ps) where it has those and no AMX "
                            "(x86-avx512-bf16: Zen 4); for d_k a multiple of 32 and d_v of 16 "
                            "(decode: 32); otherwise widened to f32"
                          : "tensor cores (mma.sync) for f16 and bf16 with head dims multiples "
                            "of 16, else widened to f32; the variants' operand products "
                            "(projections, q W, E K, chunk products) on tensor cores in TF32 "
                            "for f16 and bf16, and the attention they feed where they make its "
                            "operands in f16 or bf16 (mha, Linformer; bilinear in f16 only)"});
    }
    // The backward entry (BackwardKernel.h): dq, dk and dv of sdpa, score_mod's derivative
    // taken by the compiler; on CPUs in f32 (LowerBackward.cpp), with mha's projections
    // (ProjectionsBackward.h); on CUDA on tensor cores (MmaBackward.cpp, MatmulMma.cpp). Listed
    // beside each device's row.
    const std::vector<MaskKind> allMasks = {
        MaskKind::Causal,  MaskKind::Padding,     MaskKind::Window,
        MaskKind::Tensor,  MaskKind::Global,      MaskKind::Strided,
        MaskKind::Dilated, MaskKind::BlockSparse, MaskKind::BigBird};
    const std::vector<Modifier> backwardModifiers = {
        Modifier::Alibi,    Modifier::Softcap, Modifier::Rope,  Modifier::Dropout,
        Modifier::ScoreMod, Modifier::MaskMod, Modifier::Sinks, Modifier::Bias};
    const std::vector<Output> cpuBackwardOutputs = {Output::O, Output::Lse, Output::Backward,
                                                    Output::AuxGradients, Output::SavedProjections};
    rows.insert(
        rows.begin() + 1,
        {Device::Cpu,
         {Variant::Sdpa, Variant::Mha},
         allMasks,
         backwardModifiers,
         cpuBackwardOutputs,
         {DType::F32, DType::F16, DType::BF16},
         {MaskKind::Strided, MaskKind::Dilated},
         {{"variant=", "the backward kernel covers sdpa and mha (its projections recomputed, or "
                       "read from the forward's under save_projections, and taken back as "
                       "attn.matmul products, the weights' gradients summed over (b, t) in "
                       "order); the other variants' backward is the reference backend's"}},
         "",
         "sdpa in bf16: the recomputed scores and dP, and dK's, dV's and dQ's sums (P "
         "and G rounded to bf16), as AVX512-BF16 dot products (vdpbf16ps) in the "
         "x86-avx512-bf16 and x86-amx families (no AMX tiles in the backward: "
         "backward_dot); f16, mha (its heads in f32), and bf16 elsewhere, widened to "
         "f32"});
    rows.push_back({Device::Cuda,
                    {Variant::Sdpa, Variant::Mha},
                    allMasks,
                    backwardModifiers,
                    {Output::O, Output::Lse, Output::Backward, Output::AuxGradients},
                    {DType::F16, DType::BF16},
                    allMasks,
                    {{"variant=", "the CUDA backward covers sdpa and mha"},
                     {"dtype=", "the CUDA backward runs on tensor cores only: f16 or bf16 with "
                                "head dims multiples of 16"},
                     {"save_projections=true",
                      "not built on CUDA, whose backward recomputes mha's projections"}},
                    "",
                    "tensor cores (mma.sync): dQ's kernel recomputes S and dP beside dK's and "
                    "dV's, so no atomics; the bias's gradient summed in place by dQ's kernel, "
                    "a block per row tile of the bias's own [B or 1, H or 1]; a table's "
                    "gradient in a copy per warp of dQ's kernel (a warp's equal elements "
                    "summed in lane order by shuffles), the copies summed in order; mha's "
                    "projections recomputed and taken back as TF32 products, the weights' "
                    "gradients summed over the batch in order"});
    return rows;
  }();
  return rows;
}

} // namespace

std::optional<TuningSpace> MlirBackend::tuningSpace(const Spec& spec,
                                                    const Target& target) const {
  const ScheduleFamily family =
      mlirschedule::scheduleFamily(mlirbackend::resolveMlirTarget(target).family, spec);
  return TuningSpace{
      "mlir",
      family,
      "LLVM " LLVM_VERSION_STRING,
      mlirschedule::mlirTuningParams(family, spec),
      mlirschedule::defaultMlirSchedule(family, spec),
      [family, spec](const ScheduleParams& p) { mlirschedule::checkMlirSchedule(family, p, spec); },
      /*generated=*/{}};
}

namespace {

// The artifacts the mlir backend does not write.
void checkEmits(const EmitSet& emit) {
  for (Emit kind : emit)
    if (kind == Emit::Lib || kind == Emit::HalideLibrary || kind == Emit::HalideHeader ||
        kind == Emit::Stmt)
      throw UsageError("--emit " + std::string(emitName(kind)) +
                       ": the mlir backend writes so, mlir, llvm, asm, obj (and ptx for cuda)");
}

// The CUDA backward kernel is a tensor-core one (MmaBackward.cpp): the backward of a spec the
// forward runs on the SIMT path has none.
void checkCudaBackward(const Spec& spec, const mlirbackend::MlirTarget& target) {
  if (!spec.backward || !runsOnGpu(target.family) ||
      mlirschedule::scheduleFamily(target.family, spec) == ScheduleFamily::CudaMma)
    return;
  throw UsageError("backward=true on CUDA needs tensor cores: dtype=f16 or bf16 with d_k and d_v "
                   "multiples of 16 (got dtype=" +
                   std::string(dtypeName(spec.dtype)) + ", d_k=" + std::to_string(spec.dK) +
                   ", d_v=" + std::to_string(spec.dV) + "); the CPU targets compile the rest");
}

// The bundle of the kernel object: its manifest, the entry it links and its symbols.
std::vector<std::string> writeBundle(const Spec& spec, const CompileOptions& options,
                                     const mlirbackend::MlirTarget& target,
                                     const ScheduleParams& params, llvm::Module& llvmModule,
                                     OutputStaging& staging, const std::string& stem) {
  const bool cuda = options.target.isCuda();
  const std::filesystem::path scratch = staging.scratch();
  writeFile(scratch / "kernel.o",
            mlirbackend::emitCode(llvmModule, target, mlirbackend::CodeFile::Object));
  BundleRequest request;
  TargetNeeds needs = target.needs;
  needs.cpuFeatures = mlirbackend::neededCpuFeatures(llvmModule, target);
  request.manifest = buildManifest(options.describedSpec(spec), "mlir", params.toJson(), needs);
  request.linkInputs = {scratch / "kernel.o"};
  // A CPU bundle's backward entry first, so its attnc_kernel_run is the one of both kernels (a
  // CUDA bundle's entry finds the backward kernel itself: MlirCudaKernel.cpp).
  if (spec.backward && !cuda)
    request.linkInputs.push_back(findArchive("libattnc_bundle_mlir_backward.a"));
  request.linkInputs.push_back(
      findArchive(cuda ? "libattnc_bundle_cuda.a" : "libattnc_bundle_mlir.a"));
  request.stem = stem;
  request.abiVersion = ATTNC_ABI_VERSION;
  if (!cuda) {
    request.runner = "attnc_mlir_run";
    request.kernelSymbols = {"attnc_mlir_kernel_phases_packed",
                             "attnc_mlir_kernel_workspace_packed", "attnc_mlir_kernel_tasks_packed",
                             "attnc_mlir_kernel_run_packed", kShapeContractSymbol};
    request.kernelObject = scratch / "kernel.o";
  }
  return writeKernel(request, staging, options.emit);
}

// The text and code artifacts --emit asks for besides the bundle: ptx, mlir (the attn stage),
// llvm, asm, obj.
std::vector<std::string> writeArtifacts(const EmitSet& emit, const mlirbackend::MlirTarget& target,
                                        mlir::ModuleOp module, const std::string& attnStage,
                                        llvm::Module& llvmModule, OutputStaging& staging,
                                        const std::string& stem) {
  const std::filesystem::path scratch = staging.scratch();
  std::vector<std::string> files;
  auto write = [&](const std::string& suffix, const std::string& text) {
    writeFile(scratch / (stem + suffix), text);
    files.push_back(stem + suffix);
  };
  if (emit.count(Emit::Ptx))
    write(".ptx", embeddedPtx(module));
  if (emit.count(Emit::Mlir))
    write(".mlir", attnStage);
  if (emit.count(Emit::Llvm)) {
    std::string text;
    llvm::raw_string_ostream os(text);
    llvmModule.print(os, nullptr);
    write(".ll", text);
  }
  if (emit.count(Emit::Assembly))
    write(".s", mlirbackend::emitCode(llvmModule, target, mlirbackend::CodeFile::Assembly));
  if (emit.count(Emit::Object))
    write(".o", mlirbackend::emitCode(llvmModule, target, mlirbackend::CodeFile::Object));
  return files;
}

} // namespace

CompileResult MlirBackend::compile(const Spec& spec, const CompileOptions& options) const {
  checkEmits(options.emit);
  mlirbackend::MlirTarget target = mlirbackend::resolveMlirTarget(options.target);
  if (emitsKernel(options.emit) && !target.runsHere)
    throw UsageError("--target " + options.target.name + " is a cross target (" +
                     std::string(architectureName(options.target.architecture)) +
                     "): bundles run where they are built; use --emit with mlir, llvm, asm "
                     "or obj");
  ScheduleParams params = scheduleFor(target, spec, options);
  checkCudaBackward(spec, target);
  if (options.emit.count(Emit::Ptx) && !options.target.isCuda())
    throw UsageError("--emit ptx needs a cuda target (--target cuda-sm_80 or cuda-sm_90)");

  std::unique_ptr<mlir::MLIRContext> context = mlirbackend::makeContext();
  std::string attnStage;
  mlirbackend::PipelineOptions pipeline = pipelineFor(target, spec);
  pipeline.afterStage = [&](std::string_view stage, mlir::ModuleOp module) {
    if (stage == "attn")
      attnStage = print(module);
  };
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlirbackend::runPipeline(*context, spec, params, pipeline);
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      mlirbackend::translateToLLVM(*module, target, llvmContext);
  embedShapeContracts(*llvmModule, spec);

  const std::string stem = stemFor(options.describedSpec(spec), options.target);
  OutputStaging staging(options.outDir);
  std::vector<std::string> files;
  if (emitsKernel(options.emit))
    files = writeBundle(spec, options, target, params, *llvmModule, staging, stem);
  std::vector<std::string> artifacts =
      writeArtifacts(options.emit, target, *module, attnStage, *llvmModule, staging, stem);
  files.insert(files.end(), artifacts.begin(), artifacts.end());
  std::vector<std::filesystem::path> written = staging.commit(files);
  return {written.front(), written};
}

std::string MlirBackend::explain(const Spec& spec, const CompileOptions& options,
                                 const std::string& stage, bool printIrAfterAll) const {
  mlirbackend::MlirTarget target = mlirbackend::resolveMlirTarget(options.target);
  std::vector<std::string_view> stages =
      mlirbackend::stagesFor(mlirschedule::scheduleFamily(target.family, spec));
  stages.insert(stages.begin(), "spec"); // the spec and schedule the pipeline starts from
  if (!stage.empty() && std::find(stages.begin(), stages.end(), stage) == stages.end()) {
    std::string names;
    for (std::string_view s : stages)
      names += (names.empty() ? "" : ", ") + std::string(s);
    throw UsageError("--stage " + stage + ": unknown stage for target " + options.target.name +
                     "; stages: " + names);
  }
  ScheduleParams params = scheduleFor(target, spec, options);
  std::unique_ptr<mlir::MLIRContext> context = mlirbackend::makeContext();
  std::string text;
  mlirbackend::PipelineOptions pipeline = pipelineFor(target, spec);
  if (stage.empty() || stage == "spec")
    text += "// ----- stage spec -----\n// " + spec.canonical() + "\n// schedule " +
            params.toJson().dump() + "\n\n";
  pipeline.printIrAfterAll = printIrAfterAll;
  pipeline.afterStage = [&](std::string_view name, mlir::ModuleOp module) {
    if (!stage.empty() && name != stage)
      return;
    text += "// ----- stage " + std::string(name) + " -----\n" + print(module) + "\n";
  };
  mlirbackend::runPipeline(*context, spec, params, pipeline);
  return text;
}

const Backend& mlirBackend() {
  static const MlirBackend backend;
  return backend;
}

} // namespace attnc
