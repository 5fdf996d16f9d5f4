#include "Spec/PatternExpressions.h"

#include "Expr/ExprParse.h"
#include "Support/Errors.h"

#include <string>

namespace attnc {
namespace {

std::string patternText(const Spec& s, MaskKind kind) {
  const std::string left = std::to_string(s.windowLeft), right = std::to_string(s.windowRight);
  switch (kind) {
  case MaskKind::Window: return "kv_idx >= qpos - " + left + " && kv_idx <= qpos + " + right;
  case MaskKind::Global: {
    const std::string n = std::to_string(s.globalTokens);
    return "qpos < " + n + " || kv_idx < " + n;
  }
  default: break;
  }
  throw JobError("no expression for mask " + std::string(maskKindName(kind)));
}

} // namespace

std::optional<expr::Node> patternsAsExpression(const Spec& spec, std::span<const MaskKind> kinds) {
  std::string text;
  for (MaskKind kind : kinds)
    if (spec.masks.has(kind))
      text += (text.empty() ? "(" : " || (") + patternText(spec, kind) + ")";
  if (text.empty())
    return std::nullopt;
  return expr::parseExpr("mask", text, expr::Role::Mask, expr::Scope{});
}

} // namespace attnc
