#include "Spec/BuiltinExpressions.h"

#include "Expr/ExprParse.h"
#include "Expr/ExprPrint.h"
#include "Semantics/Positions.h"
#include "Semantics/Random.h"
#include "Support/Errors.h"

#include <algorithm>
#include <functional>
#include <limits>
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

// A float literal that parses back to exactly `value`, parenthesised so that a negative one
// stays one operand.
std::string floatLiteral(double value) {
  return "(" + expr::floatText(value) + ")";
}

// A count or distance of positions (window, global, stride, dilation; keys <= 2^31) as an int
// literal, which fits 32 bits. Every qpos - kv_idx lies within +-(2^31 - 2) and every position
// below 2^31 - 1 (sizes are ints: at most 2^31 - 1), so from 2^31 - 1 on every n compares and
// divides them alike, and 2^31 - 1 stands for it.
std::string positionLiteral(int64_t n) {
  return std::to_string(std::min<int64_t>(n, std::numeric_limits<int32_t>::max()));
}

// slopes[h] for h in [first, first + count), as a balanced tree of where() on h.
std::string headTable(std::span<const double> slopes, size_t first) {
  if (slopes.size() == 1)
    return floatLiteral(slopes.front());
  const size_t half = slopes.size() / 2;
  return "where(h < " + std::to_string(first + half) + ", " + headTable(slopes.first(half), first) +
         ", " + headTable(slopes.subspan(half), first + half) + ")";
}

// A kernel input the built-ins read as an aux tensor, and whether a spec has it.
struct BuiltinInput {
  const char* name;
  expr::Type type;
  int rank;
  bool (*read)(const Spec&);
};
constexpr BuiltinInput kBuiltinInputs[] = {
    {"lengths", expr::Type::Int, 1, [](const Spec& s) { return s.masks.has(MaskKind::Padding); }},
    {"mask", expr::Type::Int, 4, [](const Spec& s) { return s.masks.has(MaskKind::Tensor); }},
    {"bias", expr::Type::Float, 4, [](const Spec& s) { return s.bias; }},
    {"block_layout", expr::Type::Int, 3,
     [](const Spec& s) { return s.masks.has(MaskKind::BlockSparse); }},
    {"seq_lens", expr::Type::Int, 1, [](const Spec& s) { return s.cached(); }}};

// The kernel inputs the built-ins read as aux tensors, and the key philox() draws under.
expr::Scope builtinScope(std::optional<uint64_t> philoxKey) {
  expr::Scope scope{{}, {}, philoxKey};
  for (const BuiltinInput& input : kBuiltinInputs)
    scope.aux.push_back({input.name, input.type, input.rank});
  return scope;
}

// BigBird's structured blocks (docs/spec.md: a window of window_blocks centred on the query
// block, the first ceil(g/2) and last floor(g/2) block rows and columns global) on the blocks
// of (q_idx, kv_idx), or one of the random key blocks
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

// qpos - L <= kv_idx <= qpos + R in terms that 32-bit ints hold: qpos + R left them for R near
// 2^31, so kernels kept no key. The right edge as kv_idx - R <= qpos, exact for every size. The
// left edge as kv_idx >= qpos - L, a term per row that kernels compare with a vector of keys
// (the distance qpos - kv_idx, a subtraction per score, ran MLIR's windows 0.89x as fast): exact
// while qpos >= L - 2^31, so for L up to 2^30 while Tq exceeds Tk by less than 2^30 rows; a
// larger L is written as the distance.
std::string windowText(const Spec& s) {
  const std::string left = positionLiteral(s.windowLeft), right = positionLiteral(s.windowRight);
  const std::string leftEdge = s.windowLeft <= (int64_t{1} << 30) ? "kv_idx >= qpos - " + left
                                                                   : "qpos - kv_idx <= " + left;
  return leftEdge + " && kv_idx - " + right + " <= qpos";
}

std::string maskText(const Spec& s, MaskKind kind) {
  switch (kind) {
  case MaskKind::Causal: return "kv_idx <= qpos";
  // Linformer's padding acts in its projections (E K over the first lengths[b] keys): every
  // projected key is kept, unless the batch has no valid key at all.
  case MaskKind::Padding:
    return s.variant == Variant::Linformer ? "lengths[b] > 0" : "kv_idx < lengths[b]";
  case MaskKind::Tensor: return "mask[b, h, q_idx, kv_idx] != 0";
  case MaskKind::Window: return windowText(s);
  case MaskKind::Global: {
    const std::string n = positionLiteral(s.globalTokens);
    return "qpos < " + n + " || kv_idx < " + n;
  }
  case MaskKind::Strided: return "(qpos - kv_idx) % " + positionLiteral(s.stride) + " == 0";
  case MaskKind::Dilated: {
    // Keys qpos - k * dilation for k in [-right, left].
    const std::string d = positionLiteral(s.dilation);
    return "(qpos - kv_idx) % " + d + " == 0 && qpos - kv_idx <= " +
           positionLiteral(s.windowLeft * s.dilation) + " && kv_idx - qpos <= " +
           positionLiteral(s.windowRight * s.dilation);
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

// With a KV cache, batch entry b's sequence holds seq_lens[b] keys and its Tq query rows are the
// last Tq positions (docs/spec.md, "KV caches"): every expression, built-in or written, reads
// Tk as seq_lens[b] and qpos as q_idx + seq_lens[b] - Tq. The one rewrite here gives every
// code generator the cache's positions, and their tile classifiers bound them as they bound any
// aux read.
expr::Node withCachePositions(const Spec& spec, expr::Node node) {
  if (!spec.cached())
    return node;
  static const expr::Node keys =
      expr::parseExpr("kv_cache", "seq_lens[b]", expr::Role::Score, builtinScope(std::nullopt));
  static const expr::Node position = expr::parseExpr(
      "kv_cache", "q_idx + seq_lens[b] - Tq", expr::Role::Score, builtinScope(std::nullopt));
  std::function<void(expr::Node&)> rewrite = [&](expr::Node& n) {
    if (n.op == expr::Op::Variable && (n.name == "Tk" || n.name == "qpos")) {
      n = n.name == "Tk" ? keys : position;
      return;
    }
    for (expr::Node& arg : n.args)
      rewrite(arg);
  };
  rewrite(node);
  return node;
}

} // namespace

std::vector<ExpressionTensor> expressionTensors(const Spec& spec) {
  std::vector<ExpressionTensor> tensors;
  for (const AuxTensor& a : spec.aux)
    tensors.push_back({a.name, a.elementType});
  for (const BuiltinInput& input : kBuiltinInputs)
    if (input.read(spec))
      tensors.push_back({input.name, input.type});
  return tensors;
}

std::optional<expr::Node> masksAsExpression(const Spec& spec, std::span<const MaskKind> kinds) {
  std::vector<std::string> constraints, patterns;
  for (MaskKind kind : kinds)
    if (spec.masks.has(kind))
      (std::ranges::count(kSparsityPatterns, kind) ? patterns : constraints)
          .push_back("(" + maskText(spec, kind) + ")");
  if (!patterns.empty())
    constraints.push_back(anyOf(patterns));
  if (spec.cached()) // the keys of the sequence (Tk is seq_lens[b] after the rewrite)
    constraints.push_back("(kv_idx < Tk)");
  if (constraints.empty())
    return std::nullopt;
  std::string text = constraints.front();
  for (size_t k = 1; k < constraints.size(); ++k)
    text += " && " + constraints[k];
  const std::optional<uint64_t> key =
      spec.seed ? std::optional(random::streamKey(*spec.seed, random::kBigBirdStream))
                : std::nullopt;
  return withCachePositions(spec, expr::parseExpr("mask", text, expr::Role::Mask, builtinScope(key)));
}

std::optional<expr::Node> masksWithMaskMod(const Spec& spec, std::span<const MaskKind> kinds) {
  std::optional<expr::Node> masks = masksAsExpression(spec, kinds);
  if (!spec.maskMod.tree)
    return masks;
  expr::Node maskMod = withCachePositions(spec, *spec.maskMod.tree);
  if (!masks)
    return maskMod;
  return expr::Node{expr::Op::And, expr::Type::Bool, 0, 0, "", {*masks, std::move(maskMod)}};
}

std::optional<expr::Node> scoreModAsExpression(const Spec& spec) {
  if (!spec.scoreMod.tree)
    return std::nullopt;
  return withCachePositions(spec, *spec.scoreMod.tree);
}

std::optional<expr::Node> modifiersAsExpression(const Spec& spec) {
  if (spec.softcap <= 0 && !spec.alibi && !spec.bias)
    return std::nullopt;
  std::string score = "score";
  if (spec.softcap > 0) {
    const std::string cap = floatLiteral(spec.softcap);
    score = cap + " * tanh(" + score + " / " + cap + ")";
  }
  if (spec.alibi) {
    const std::vector<double> slopes = positions::alibiSlopes(spec.heads);
    score = "(" + score + ") - " + headTable(slopes, 0) + " * abs(qpos - kv_idx)";
  }
  if (spec.bias)
    score = "(" + score + ") + bias[b, h, q_idx, kv_idx]";
  return withCachePositions(
      spec, expr::parseExpr("score", score, expr::Role::Score, builtinScope(std::nullopt)));
}

std::optional<expr::Node> dropoutAsExpression(const Spec& spec) {
  if (spec.dropout <= 0)
    return std::nullopt;
  // random::dropoutKeeps keeps where the unsigned word w >= T = dropoutThreshold(p); philox()
  // reads w as a signed int s, which is w for w < 2^31 and w - 2^32 above.
  const int64_t threshold = random::dropoutThreshold(spec.dropout);
  const std::string word = "philox(kv_idx // 4, q_idx, h, b, kv_idx % 4)";
  std::string keep = "true";
  constexpr int64_t kHalf = int64_t{1} << 31;
  if (threshold > 0 && threshold < kHalf)
    keep = word + " < 0 || " + word + " >= " + std::to_string(threshold);
  else if (threshold == kHalf) // p = 0.5; no int literal -2^31, which a 32-bit negation overflows
    keep = word + " < 0";
  else if (threshold > kHalf)
    keep = word + " < 0 && " + word + " >= " + std::to_string(threshold - 2 * kHalf);
  const std::string text =
      "where(" + keep + ", " + floatLiteral(1.0 / (1.0 - spec.dropout)) + ", 0.0)";
  return withCachePositions(
      spec, expr::parseExpr("dropout", text, expr::Role::Score,
                            builtinScope(random::streamKey(*spec.seed, random::kDropoutStream))));
}

} // namespace attnc
