//===- ExpressionRegion.h - the arguments of a score_mod or mask_mod region ---------===//
//
// Attn_ExpressionRegion's block takes the score (f32), then the i32 coordinates and lengths, in
// this order; their names are the expression language's (docs/spec.md). Whoever builds a
// region, verifies it or binds its arguments indexes them by this enum.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_IR_EXPRESSIONREGION_H
#define ATTNC_DIALECTS_ATTN_IR_EXPRESSIONREGION_H

#include <array>
#include <string_view>

namespace attnc::attn {

enum class ExpressionArgument { Score, B, H, G, QIdx, KvIdx, QPos, SeqQ, SeqK };

inline constexpr std::array<std::string_view, 9> kExpressionArgumentNames = {
    "score", "b", "h", "g", "q_idx", "kv_idx", "qpos", "Tq", "Tk"};

inline constexpr size_t index(ExpressionArgument argument) {
  return static_cast<size_t>(argument);
}

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_IR_EXPRESSIONREGION_H
