// The "attn" stage: a spec as one attn.attention in a kernel function whose arguments are the
// bundle's (compiler/Abi/Arguments.h), as strided memrefs, with the attn.matmul products a
// variant's operands need around it (VariantOperands.h); for linear attention, which has no
// softmax, its own ops (LinearAttention.h).
#ifndef ATTNC_COMPILER_BACKENDS_MLIR_SPECTOATTN_H
#define ATTNC_COMPILER_BACKENDS_MLIR_SPECTOATTN_H

#include "Spec/Spec.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OwningOpRef.h"

namespace attnc::mlirbackend {

// The kernel function's name; the llvm stage splits it into <name>_tasks and <name>_run.
inline constexpr const char* kKernelName = "attnc_mlir_kernel";

// An ABI dtype's element type ("f32", "bf16", "i32", "u8", ...).
mlir::Type elementType(mlir::MLIRContext& context, const std::string& dtype);

// The type of every kernel argument, and so of every operand the lowerings take: `shape` of
// `element` with dynamic strides and offset (the runtime passes any DLPack strides through).
mlir::MemRefType withArgumentLayout(llvm::ArrayRef<int64_t> shape, mlir::Type element);

// The spec must be one the backend's capability rows cover (MlirBackend.cpp); the driver
// checks that first. A variant's products make the attention's operands in `operandDtype`
// (mlirschedule::attentionOperandDtype for the schedule family).
mlir::OwningOpRef<mlir::ModuleOp> buildAttnModule(mlir::MLIRContext& context, const Spec& spec,
                                                  DType operandDtype);

} // namespace attnc::mlirbackend

#endif // ATTNC_COMPILER_BACKENDS_MLIR_SPECTOATTN_H
