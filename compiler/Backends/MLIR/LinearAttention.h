// Linear attention (docs/spec.md, "linear") as attn ops on buffers (dialects/attn/IR/
// AttnLinearOps.td): the feature rows, attn.matmul products and a prefix over chunks of rows,
// so its time grows linearly with T. The kernel's body for variant=linear in place of
// attn.attention.
#ifndef ATTNC_COMPILER_BACKENDS_MLIR_LINEARATTENTION_H
#define ATTNC_COMPILER_BACKENDS_MLIR_LINEARATTENTION_H

#include "Spec/Spec.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <map>
#include <string>

namespace attnc::mlirbackend {

// Emits the workspace, the ops and the workspace's release at b's point, from the kernel's
// arguments by name (each viewed heads first where it has heads).
void buildLinearAttention(mlir::ImplicitLocOpBuilder& b, const Spec& spec,
                          const std::map<std::string, mlir::Value>& arguments);

} // namespace attnc::mlirbackend

#endif // ATTNC_COMPILER_BACKENDS_MLIR_LINEARATTENTION_H
