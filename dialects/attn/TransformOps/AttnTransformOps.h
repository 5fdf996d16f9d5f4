//===- AttnTransformOps.h - schedule steps for the attn pipeline --------------===//
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMOPS_ATTNTRANSFORMOPS_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMOPS_ATTNTRANSFORMOPS_H

#include "attn/IR/AttnOps.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Transform/IR/TransformDialect.h"
#include "mlir/Dialect/Transform/IR/TransformTypes.h"
#include "mlir/Dialect/Transform/Interfaces/TransformInterfaces.h"
#include "mlir/IR/DialectRegistry.h"

// clang-format off
#define GET_OP_CLASSES
#include "attn/TransformOps/AttnTransformOps.h.inc"
// clang-format on

namespace attnc::attn {

// Adds the transform.attn.* ops to the transform dialect.
void registerTransformDialectExtension(mlir::DialectRegistry& registry);

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMOPS_ATTNTRANSFORMOPS_H
