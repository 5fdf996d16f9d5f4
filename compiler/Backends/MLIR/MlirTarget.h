// An attnc Target in the MLIR backend's terms: an LLVM triple, CPU and features, the schedule
// family they imply, and the code generation through LLVM's TargetMachine.
#ifndef ATTNC_COMPILER_BACKENDS_MLIR_MLIRTARGET_H
#define ATTNC_COMPILER_BACKENDS_MLIR_MLIRTARGET_H

#include "Abi/Manifest.h"
#include "ScheduleFamily.h"
#include "mlir/IR/BuiltinOps.h"

#include <memory>
#include <string>

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
} // namespace llvm

namespace attnc::mlirbackend {

struct MlirTarget {
  std::string triple, cpu, features; // of the host code (for cuda: the launching code)
  ScheduleFamily family; // X86Amx, X86Avx512Bf16, X86Avx512, X86Avx2, ArmNeon or Cuda: the schedule
  std::string gpuChip, ptxFeatures; // cuda: "sm_90", "+ptx80"
  TargetNeeds needs; // the target and the /proc/cpuinfo features the code needs
  bool runsHere;     // same architecture as this host: a bundle can be linked and loaded
  std::shared_ptr<llvm::TargetMachine> machine;
};

MlirTarget resolveMlirTarget(const Target& target);

// The LLVM-dialect module as optimised (O3) LLVM IR for the target.
std::unique_ptr<llvm::Module> translateToLLVM(mlir::ModuleOp module, const MlirTarget& target,
                                              llvm::LLVMContext& context);

// The CPU features `module`'s code needs: the target's, less AMX's where the module has no tile
// instruction (only the amx dialect's intrinsics make them), so that the loader asks Linux for
// the tile state, and refuses a CPU without tiles, only for kernels that use them.
std::vector<std::string> neededCpuFeatures(const llvm::Module& module, const MlirTarget& target);

enum class CodeFile { Object, Assembly };
// `module` as an object or assembly file, in memory: LLVM's file streams end the process on a
// write error (Support/Files.h's writeFile checks instead). Throws JobError.
std::string emitCode(llvm::Module& module, const MlirTarget& target, CodeFile kind);

} // namespace attnc::mlirbackend

#endif // ATTNC_COMPILER_BACKENDS_MLIR_MLIRTARGET_H
