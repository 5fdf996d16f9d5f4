#include "Backends/MLIR/MlirTarget.h"

#include "Support/Errors.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

#include <array>
#include <mutex>

namespace attnc::mlirbackend {
namespace {

// The LLVM CPU of a CPU instruction-set level below Native (this host's own CPU).
const char* cpuOf(IsaLevel isa) {
  switch (isa) {
  case IsaLevel::Avx2:
    return "haswell";
  case IsaLevel::Avx512:
    return "skylake-avx512";
  case IsaLevel::Zen4: return "znver4";
  case IsaLevel::SapphireRapids:
    return "sapphirerapids";
  case IsaLevel::Neon:
    return "neoverse-n1";
  case IsaLevel::Native:
    break;
  }
  return "generic";
}

// PTX ISA 8.0 (CUDA 12.0 drivers and newer) covers sm_80 and sm_90.
constexpr const char* kPtxFeatures = "+ptx80";

// LLVM feature names and the /proc/cpuinfo flags that show them: every vector extension an
// x86 target's CPU model may let LLVM use (Zen 4's and Sapphire Rapids' VBMI, IFMA, GFNI, ...,
// which a Cooper Lake lacks beside its AVX512-BF16), so that a manifest names all it needs.
constexpr std::array<std::pair<const char*, const char*>, 25> kCpuFlags{{
    {"sse4.1", "sse4_1"},
    {"avx", "avx"},
    {"avx2", "avx2"},
    {"fma", "fma"},
    {"f16c", "f16c"},
    {"avx512f", "avx512f"},
    {"avx512cd", "avx512cd"},
    {"avx512dq", "avx512dq"},
    {"avx512bw", "avx512bw"},
    {"avx512vl", "avx512vl"},
    {"avx512vbmi", "avx512vbmi"},
    {"avx512vbmi2", "avx512_vbmi2"},
    {"avx512ifma", "avx512ifma"},
    {"avx512bitalg", "avx512_bitalg"},
    {"avx512vpopcntdq", "avx512_vpopcntdq"},
    {"gfni", "gfni"},
    {"vaes", "vaes"},
    {"vpclmulqdq", "vpclmulqdq"},
    {"avx512bf16", "avx512_bf16"},
    {"avx512fp16", "avx512_fp16"},
    {"avx512vnni", "avx512_vnni"},
    {"avxvnni", "avx_vnni"},
    {"amx-tile", "amx_tile"},
    {"amx-bf16", "amx_bf16"},
    {"neon", "asimd"},
}};

void initializeLLVM() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
  });
}

std::string hostFeatures() {
  std::string joined;
  for (const auto& f : llvm::sys::getHostCPUFeatures())
    joined += (joined.empty() ? "" : ",") + std::string(f.second ? "+" : "-") + f.first().str();
  return joined;
}

// For each C-interface function _mlir_ciface_<f> (llvm.emit_c_interface: memrefs as pointers
// to descriptors), <f>_packed(ptr args) calling it with args[i] pointing at argument i, and
// storing its result, when it has one, where args[n] points (MLIR's packed convention). The
// bundle's entry calls every kernel through this one signature, whatever its number of
// arguments (runtime/bundle/MemrefCall.h).
void addPackedInterfaces(llvm::Module& module) {
  constexpr llvm::StringLiteral kPrefix = "_mlir_ciface_";
  llvm::LLVMContext& context = module.getContext();
  llvm::PointerType* ptr = llvm::PointerType::getUnqual(context);
  llvm::FunctionType* packedType =
      llvm::FunctionType::get(llvm::Type::getVoidTy(context), {ptr}, /*isVarArg=*/false);
  llvm::SmallVector<llvm::Function*> interfaces;
  for (llvm::Function& f : module)
    if (!f.isDeclaration() && f.getName().starts_with(kPrefix))
      interfaces.push_back(&f);
  for (llvm::Function* f : interfaces) {
    llvm::Function* packed =
        llvm::Function::Create(packedType, llvm::GlobalValue::ExternalLinkage,
                               f->getName().drop_front(kPrefix.size()) + "_packed", module);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(context, "entry", packed));
    // The address args[i] holds.
    auto slot = [&](unsigned i) {
      return b.CreateLoad(ptr, b.CreateConstInBoundsGEP1_64(ptr, packed->getArg(0), i));
    };
    llvm::SmallVector<llvm::Value*> args;
    for (llvm::Argument& arg : f->args())
      args.push_back(b.CreateLoad(arg.getType(), slot(arg.getArgNo())));
    llvm::CallInst* result = b.CreateCall(f, args);
    if (!f->getReturnType()->isVoidTy())
      b.CreateStore(result, slot(f->arg_size()));
    b.CreateRetVoid();
  }
}

} // namespace

MlirTarget resolveMlirTarget(const Target& target) {
  initializeLLVM();
  MlirTarget t;
  if (target.isCuda()) {
    // The launching code runs on this host; the kernel is the GPU module's.
    t.triple = llvm::sys::getDefaultTargetTriple();
    t.cpu = "generic";
    t.gpuChip = target.cudaArch();
  } else if (target.isa == IsaLevel::Native) {
    t.triple = llvm::sys::getDefaultTargetTriple();
    t.cpu = llvm::sys::getHostCPUName().str();
    t.features = hostFeatures();
  } else {
    t.triple = target.architecture == Architecture::AArch64 ? "aarch64-unknown-linux-gnu"
                                                            : "x86_64-unknown-linux-gnu";
    t.cpu = cpuOf(target.isa);
  }
  std::string error;
  const llvm::Target* llvmTarget = llvm::TargetRegistry::lookupTarget(t.triple, error);
  if (!llvmTarget)
    throw JobError("mlir backend: LLVM has no target for " + t.triple + ": " + error);
  llvm::TargetOptions options;
  t.machine.reset(llvmTarget->createTargetMachine(t.triple, t.cpu, t.features, options,
                                                  llvm::Reloc::PIC_, std::nullopt,
                                                  llvm::CodeGenOptLevel::Aggressive));
  const llvm::MCSubtargetInfo* subtarget = t.machine->getMCSubtargetInfo();
  auto has = [&](const char* feature) {
    return subtarget->checkFeatures(std::string("+") + feature);
  };
  const bool arm = target.architecture == Architecture::AArch64;
  t.needs.target = target;
  if (target.isCuda()) {
    // The host code only launches: it needs no optional CPU feature.
    t.family = ScheduleFamily::Cuda;
    t.ptxFeatures = kPtxFeatures;
  } else {
    for (auto [feature, flag] : kCpuFlags)
      if ((std::string_view(feature) == "neon") == arm && has(feature))
        t.needs.cpuFeatures.push_back(flag);
    // bf16 products in pairs: AVX512-BF16's vdpbf16ps (x86-avx512-bf16), or AMX tiles, whose
    // kernels also round with vcvtne2ps2bf16 and take partial chunks' keys as vdpbf16ps.
    const bool bf16 = has("avx512f") && has("avx512bf16");
    const bool amx = bf16 && has("amx-tile") && has("amx-bf16");
    t.family = arm              ? ScheduleFamily::ArmNeon
               : amx            ? ScheduleFamily::X86Amx
               : bf16           ? ScheduleFamily::X86Avx512Bf16
               : has("avx512f") ? ScheduleFamily::X86Avx512
                                : ScheduleFamily::X86Avx2;
  }
  t.runsHere = target.architecture == hostArchitecture();
  return t;
}

std::vector<std::string> neededCpuFeatures(const llvm::Module& module, const MlirTarget& target) {
  const bool tiles = llvm::any_of(module, [](const llvm::Function& f) {
    return f.isIntrinsic() && !f.use_empty() &&
           (f.getName().starts_with("llvm.x86.tile") || f.getName().starts_with("llvm.x86.tdp"));
  });
  std::vector<std::string> needed;
  for (const std::string& flag : target.needs.cpuFeatures)
    if (tiles || (flag != "amx_tile" && flag != "amx_bf16"))
      needed.push_back(flag);
  return needed;
}

std::unique_ptr<llvm::Module> translateToLLVM(mlir::ModuleOp module, const MlirTarget& target,
                                              llvm::LLVMContext& context) {
  std::unique_ptr<llvm::Module> llvmModule = mlir::translateModuleToLLVMIR(module, context);
  if (!llvmModule)
    throw JobError("mlir backend: translating the LLVM dialect to LLVM IR failed");
  llvmModule->setTargetTriple(target.triple);
  llvmModule->setDataLayout(target.machine->createDataLayout());
  addPackedInterfaces(*llvmModule);
  // The vector code is written for the target's full width: let the backend use it (LLVM
  // otherwise splits 512-bit vectors on CPUs that prefer 256-bit ones).
  const bool wide = target.family == ScheduleFamily::X86Avx512 ||
                    target.family == ScheduleFamily::X86Avx512Bf16 ||
                    target.family == ScheduleFamily::X86Amx;
  for (llvm::Function& f : *llvmModule) {
    if (f.isDeclaration())
      continue;
    if (target.cpu != "generic")
      f.addFnAttr("target-cpu", target.cpu);
    if (!target.features.empty())
      f.addFnAttr("target-features", target.features);
    if (wide) {
      f.addFnAttr("prefer-vector-width", "512");
      f.addFnAttr("min-legal-vector-width", "512");
    }
  }

  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder builder(target.machine.get());
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager passes =
      builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  passes.run(*llvmModule, mam);
  return llvmModule;
}

std::string emitCode(llvm::Module& module, const MlirTarget& target, CodeFile kind) {
  llvm::SmallVector<char, 0> code;
  llvm::raw_svector_ostream out(code);
  llvm::legacy::PassManager passes;
  auto type = kind == CodeFile::Object ? llvm::CodeGenFileType::ObjectFile
                                       : llvm::CodeGenFileType::AssemblyFile;
  if (target.machine->addPassesToEmitFile(passes, out, nullptr, type))
    throw JobError("mlir backend: LLVM cannot emit this file type for " + target.triple);
  passes.run(module);
  return std::string(code.begin(), code.end());
}

} // namespace attnc::mlirbackend
