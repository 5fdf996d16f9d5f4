//===- AttnDialect.cpp - the attn dialect -------------------------------------===//
#include "attn/IR/AttnDialect.h"

#include "attn/IR/AttnOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

using namespace mlir;
using namespace attnc::attn;

#include "attn/IR/AttnOpsDialect.cpp.inc"

void AttnDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "attn/IR/AttnOps.cpp.inc"
      >();
}
