//===- AttnDialect.h - the attn dialect --------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_IR_ATTNDIALECT_H
#define ATTNC_DIALECTS_ATTN_IR_ATTNDIALECT_H

#include "attn/IR/AttnOpsDialect.h.inc"
#include "mlir/IR/Dialect.h"

#endif // ATTNC_DIALECTS_ATTN_IR_ATTNDIALECT_H
