//===- attn-opt.cpp - mlir-opt for the attn dialect ---------------------------===//
//
// Parses, verifies, transforms and prints IR with the attn dialect, its passes, its
// transform-dialect ops and the upstream dialects its pipeline lowers through. The lit suite
// (dialects/attn/test) drives it.
//
//===---------------------------------------------------------------------------===//
#include "attn/IR/AttnDialect.h"
#include "attn/TransformOps/AttnTransformOps.h"
#include "attn/Transforms/Passes.h"
#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/TransformOps/DialectExtension.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Transform/IR/TransformDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/AMX/AMXToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char** argv) {
  mlir::DialectRegistry registry;
  registry.insert<attnc::attn::AttnDialect, mlir::amx::AMXDialect, mlir::affine::AffineDialect,
                  mlir::arith::ArithDialect, mlir::bufferization::BufferizationDialect,
                  mlir::cf::ControlFlowDialect, mlir::func::FuncDialect, mlir::gpu::GPUDialect,
                  mlir::index::IndexDialect, mlir::LLVM::LLVMDialect, mlir::NVVM::NVVMDialect,
                  mlir::math::MathDialect, mlir::memref::MemRefDialect, mlir::nvgpu::NVGPUDialect,
                  mlir::scf::SCFDialect, mlir::tensor::TensorDialect,
                  mlir::transform::TransformDialect, mlir::vector::VectorDialect>();
  attnc::attn::registerTransformDialectExtension(registry);
  // transform.structured.match, which schedules use to find attn ops.
  mlir::linalg::registerTransformDialectExtension(registry);
  // gpu-module-to-binary serializes through the NVVM target and the LLVM IR translations.
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  mlir::registerAMXDialectTranslation(registry);
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerGPUDialectTranslation(registry);
  mlir::gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(registry);
  mlir::registerLLVMDialectTranslation(registry);
  mlir::registerNVVMDialectTranslation(registry);
  mlir::registerAllPasses();
  attnc::attn::registerAttnPipelines();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "attn-opt: the attn dialect's optimizer driver\n", registry));
}
