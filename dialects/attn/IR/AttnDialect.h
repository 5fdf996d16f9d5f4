//===- AttnDialect.h - the attn dialect --------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_IR_ATTNDIALECT_H
#define ATTNC_DIALECTS_ATTN_IR_ATTNDIALECT_H

#include "mlir/IR/Dialect.h"

// Generated declarations come after what they use.
// clang-format off
#include "attn/IR/AttnOpsDialect.h.inc"
// clang-format on

#endif // ATTNC_DIALECTS_ATTN_IR_ATTNDIALECT_H
