// The "attn" stage: a spec as one attn.attention in a kernel function whose arguments are the
// bundle's (compiler/Abi/Arguments.h), as strided memrefs, with the attn.matmul products a
// variant's operands need around it (VariantOperands.h); for linear attention, which has no
// softmax, its own ops (LinearAttention.h); with backward=true, the backward entry's kernel
// beside it (BackwardKernel.h).
#ifndef ATTNC_COMPILER_BACKENDS_MLIR_SPECTOATTN_H
#define ATTNC_COMPILER_BACKENDS_MLIR_SPECTOATTN_H

#include "Abi/Arguments.h"
#include "Backends/MLIR/ExprToMlir.h"
#include "Spec/Spec.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/OwningOpRef.h"

#include <map>
#include <optional>

namespace attnc::mlirbackend {

class VariantOperands;

// The kernel function's name; the llvm stage splits it into <name>_tasks and <name>_run.
inline constexpr const char* kKernelName = "attnc_mlir_kernel";

// The backward entry's kernel function (a spec with backward=true; BackwardKernel.h).
inline constexpr const char* kBackwardKernelName = "attnc_mlir_backward";

// An ABI dtype's element type ("f32", "bf16", "i32", "u8", ...).
mlir::Type elementType(mlir::MLIRContext& context, const std::string& dtype);

// The type of every kernel argument, and so of every operand the lowerings take: `shape` of
// `element` with dynamic strides and offset (the runtime passes any DLPack strides through).
mlir::MemRefType withArgumentLayout(llvm::ArrayRef<int64_t> shape, mlir::Type element);

// A kernel function `name` taking `args` as memrefs (attn.kernel: the llvm stage outlines its
// phases), the builder left at the start of its body.
mlir::func::FuncOp addKernelFunction(mlir::ImplicitLocOpBuilder& b, const Spec& spec,
                                     const std::vector<Argument>& args, llvm::StringRef name);

// The kernel's arguments by name, each a memref as the ops take it (BSHD tensors viewed BHSD).
std::map<std::string, mlir::Value> argumentsByName(mlir::ImplicitLocOpBuilder& b, const Spec& spec,
                                                   const std::vector<Argument>& args,
                                                   mlir::func::FuncOp kernel);

// The argument `name`, or null where the spec's kernel has none.
mlir::Value optionalArgument(const std::map<std::string, mlir::Value>& byName,
                             const std::string& name);

// The tensors the expressions read (a spec's aux tensors and the kernel inputs the built-ins
// read: lengths, mask, bias, block_layout), in the order a score op takes them as aux operands.
std::vector<AuxOperand> auxOperandsOf(const Spec& spec,
                                      const std::map<std::string, mlir::Value>& byName);

// The expressions a score goes through, in order: the built-in modifiers (softcap, ALiBi,
// bias), then the spec's score_mod.
struct ScoreExpressions {
  explicit ScoreExpressions(const Spec& spec);
  std::optional<expr::Node> modifiers, scoreMod;
  llvm::SmallVector<const expr::Node*, 2> trees; // those present, in order
};

// A score op's score_mod region (ScoreExpressions) and mask_mod region (every built-in mask
// with the spec's mask_mod).
void buildScoreRegions(mlir::Region& scoreRegion, mlir::Region& maskRegion, const Spec& spec,
                       std::span<const AuxOperand> auxOperands);

// Where attn.attention's results go: the output's buffer, and lse's and the weights' where
// they are asked for (else null).
struct AttentionResults {
  mlir::Value output, lse, weights;
};

// The spec's attn.attention over `operands`' query, keys and values at b's point (on tensors
// read from those buffers, every aux operand the spec's expressions read), its results
// stored into `into`.
void buildAttention(mlir::ImplicitLocOpBuilder& b, const Spec& spec,
                    const std::map<std::string, mlir::Value>& byName,
                    const VariantOperands& operands, const AttentionResults& into);

// The spec must be one the backend's capability rows cover (MlirBackend.cpp); the driver
// checks that first. A variant's products make the attention's operands in `operandDtype`
// (mlirschedule::attentionOperandDtype for the schedule family).
mlir::OwningOpRef<mlir::ModuleOp> buildAttnModule(mlir::MLIRContext& context, const Spec& spec,
                                                  DType operandDtype);

} // namespace attnc::mlirbackend

#endif // ATTNC_COMPILER_BACKENDS_MLIR_SPECTOATTN_H
