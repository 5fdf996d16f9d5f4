//===- Passes.h - the attn pipeline's passes ----------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMS_PASSES_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace attnc::attn {

// clang-format off
#define GEN_PASS_DECL
#include "attn/Transforms/Passes.h.inc"
#define GEN_PASS_REGISTRATION
#include "attn/Transforms/Passes.h.inc"
// clang-format on

// The "llvm" stage: outlined tasks, approximated math and every dialect to LLVM
// (registered as the attn-lower-to-llvm pipeline).
void buildLowerToLLVMPipeline(mlir::OpPassManager& pm);

// The CUDA "gpu" stage: tasks as GPU threads, kernels outlined into a gpu.module.
void buildMapToGpuPipeline(mlir::OpPassManager& pm, int64_t blockThreads);

// The CUDA "llvm" stage: the gpu.module to NVVM with an #nvvm.target for `chip` (sm_80,
// sm_90), serialized to PTX into a gpu.binary; the host side to the LLVM dialect, launching
// through the mgpu* runtime functions (implemented by the bundle, runtime/bundle/MlirCudaKernel.cpp).
void buildGpuLowerToLLVMPipeline(mlir::OpPassManager& pm, const std::string& chip,
                                 const std::string& ptxFeatures);

// The attn passes and the attn-lower-to-llvm pipeline, for attn-opt.
void registerAttnPipelines();

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_PASSES_H
