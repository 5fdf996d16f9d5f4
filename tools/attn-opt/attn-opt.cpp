//===- attn-opt.cpp - mlir-opt for the attn dialect ---------------------------===//
//
// Parses, verifies, transforms and prints IR with the attn dialect and the upstream dialects
// its pipeline lowers through. The lit suite (tests/ir) drives it.
//
//===---------------------------------------------------------------------------===//
#include "attn/IR/AttnDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char** argv) {
  mlir::DialectRegistry registry;
  registry.insert<attnc::attn::AttnDialect, mlir::arith::ArithDialect, mlir::func::FuncDialect,
                  mlir::tensor::TensorDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "attn-opt: the attn dialect's optimizer driver\n", registry));
}
