#include "Spec/PatternExpressions.h"

#include "Expr/ExprParse.h"
#include "Semantics/Random.h"
#include "Support/Errors.h"

#include <span>
#include <string>
#include <vector>

namespace attnc {
namespace {

// The disjunction of `terms` as a balanced tree, so that its depth (which the parser bounds and
// every walk of the tree recurses through) grows with log2 of their number.
std::string anyOf(std::span<const std::string> terms) {
  if (terms.size() == 1)
    return "(" + terms.front() + ")";
  const size_t half = terms.size() / 2;
  return "(" + anyOf(terms.first(half)) + " || " + anyOf(terms.subspan(half)) + ")";
}

// masks::bigbirdStructured on the blocks of (q_idx, kv_idx), or one of the random key blocks
// random::bigbirdRandomBlock draws: the unsigned Philox word mod the key blocks K, from the
// signed word philox() gives as (w mod K + [w < 0] (2^32 mod K)) mod K, with 2^32 mod K
// written so that no term leaves 32 bits.
std::string bigbirdText(const Spec& s) {
  const std::string block = std::to_string(s.block);
  const std::string qb = "q_idx // " + block, kb = "kv_idx // " + block;
  const std::string queryBlocks = "(Tq + " + std::to_string(s.block - 1) + ") // " + block;
  const std::string keyBlocks = "((Tk + " + std::to_string(s.block - 1) + ") // " + block + ")";
  const std::string half = std::to_string(s.windowBlocks / 2);
  const std::string first = std::to_string((s.globalBlocks + 1) / 2);
  const std::string last = std::to_string(s.globalBlocks / 2);
  std::vector<std::string> terms = {
      "(" + kb + " - " + qb + " <= " + half + " && " + qb + " - " + kb + " <= " + half + ") || " +
      qb + " < " + first + " || " + qb + " >= " + queryBlocks + " - " + last + " || " + kb +
      " < " + first + " || " + kb + " >= " + keyBlocks + " - " + last};
  const std::string wrap = "(2 * ((2147483647 % " + keyBlocks + " + 1) % " + keyBlocks + ")) % " +
                           keyBlocks;
  for (int64_t r = 0; r < s.randomBlocks; ++r) {
    const std::string word = "philox(" + std::to_string(r / 4) + ", " + qb + ", h, 0, " +
                             std::to_string(r % 4) + ")";
    terms.push_back("(" + word + " % " + keyBlocks + " + where(" + word + " < 0, " + wrap +
                    ", 0)) % " + keyBlocks + " == " + kb);
  }
  return anyOf(terms);
}

std::string patternText(const Spec& s, MaskKind kind) {
  const std::string left = std::to_string(s.windowLeft), right = std::to_string(s.windowRight);
  switch (kind) {
  case MaskKind::Window: return "kv_idx >= qpos - " + left + " && kv_idx <= qpos + " + right;
  case MaskKind::Global: {
    const std::string n = std::to_string(s.globalTokens);
    return "qpos < " + n + " || kv_idx < " + n;
  }
  case MaskKind::Strided: return "(qpos - kv_idx) % " + std::to_string(s.stride) + " == 0";
  case MaskKind::Dilated: {
    // Keys qpos - k * dilation for k in [-right, left].
    const std::string d = std::to_string(s.dilation);
    return "(qpos - kv_idx) % " + d + " == 0 && qpos - kv_idx <= " +
           std::to_string(s.windowLeft * s.dilation) + " && kv_idx - qpos <= " +
           std::to_string(s.windowRight * s.dilation);
  }
  case MaskKind::BlockSparse: {
    const std::string block = std::to_string(s.block);
    return "block_layout[h, q_idx // " + block + ", kv_idx // " + block + "] != 0";
  }
  case MaskKind::BigBird: return bigbirdText(s);
  default: break;
  }
  throw JobError("no expression for mask " + std::string(maskKindName(kind)));
}

} // namespace

std::optional<expr::Node> patternsAsExpression(const Spec& spec, std::span<const MaskKind> kinds) {
  std::vector<std::string> patterns;
  for (MaskKind kind : kinds)
    if (spec.masks.has(kind))
      patterns.push_back(patternText(spec, kind));
  if (patterns.empty())
    return std::nullopt;
  const std::string text = anyOf(patterns);
  // block_sparse reads the layout; BigBird draws under the seed, in its stream.
  expr::Scope scope{{}, {{"block_layout", expr::Type::Int, 3}}, std::nullopt};
  if (spec.seed)
    scope.philoxKey = (*spec.seed & 0xFFFFFFFFu) |
                      (((*spec.seed >> 32) ^ random::kBigBirdStream) << 32);
  return expr::parseExpr("mask", text, expr::Role::Mask, scope);
}

} // namespace attnc
