//===- AttnOps.h - attn dialect operations -----------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_IR_ATTNOPS_H
#define ATTNC_DIALECTS_ATTN_IR_ATTNOPS_H

#include "attn/IR/AttnDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

// clang-format off
#define GET_OP_CLASSES
#include "attn/IR/AttnOps.h.inc"
// clang-format on

#endif // ATTNC_DIALECTS_ATTN_IR_ATTNOPS_H
