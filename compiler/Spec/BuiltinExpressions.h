// The built-in masks and modifiers written in the expression language (docs/spec.md,
// Expressions), with the spec's parameters as literals: the one definition the f64 reference
// evaluates and every code generator compiles through its expression translator. Each agrees with its definition written apart (tests/unit/MaskPredicates.h;
// the ALiBi slopes; random::dropoutKeeps) element for element:
// tests/unit/BuiltinExpressionsTest.cpp.
//
// They read the kernel's own inputs as aux tensors of the same names: `lengths` [B] (padding),
// `seq_lens` [B] (a KV cache's keys per sequence),
// `mask` [B|1, H|1, Tq, Tk] (the tensor mask, nonzero keeps), `bias` [B|1, H|1, Tq, Tk] and
// `block_layout` [H|1, ceil(Tq/block), ceil(Tk/block)] (block_sparse); a dimension of extent 1
// broadcasts (the reference reads index 0 there; kernels clamp every aux index). BigBird draws
// its random blocks, and dropout its keep decisions, with philox() under the spec's seed in their
// streams (Semantics/Random.h).
#ifndef ATTNC_COMPILER_SPEC_BUILTINEXPRESSIONS_H
#define ATTNC_COMPILER_SPEC_BUILTINEXPRESSIONS_H

#include "Expr/Expr.h"
#include "Spec/Spec.h"

#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace attnc {

// Every built-in mask: the constraints (causal, padding, tensor), which intersect, and the
// sparsity patterns.
inline constexpr MaskKind kBuiltinMasks[] = {
    MaskKind::Causal,  MaskKind::Padding,     MaskKind::Tensor,  MaskKind::Window,
    MaskKind::Global,  MaskKind::Strided,     MaskKind::Dilated, MaskKind::BlockSparse,
    MaskKind::BigBird};
static_assert(std::size(kBuiltinMasks) == static_cast<size_t>(MaskKind::Count),
              "every mask kind has its expression");

// A tensor the spec's expressions read by name, with its elements' type in the language.
struct ExpressionTensor {
  std::string name;
  expr::Type type;
};
// Every one: the spec's aux tensors, then the kernel inputs its built-ins read (lengths, mask,
// bias, block_layout).
std::vector<ExpressionTensor> expressionTensors(const Spec& spec);

// Every function below gives its expression with a KV cache's positions (kv_cache=): Tk read as
// seq_lens[b] and qpos as q_idx + seq_lens[b] - Tq, for built-ins and written expressions alike.

// The spec's masks among `kinds` as one mask: its constraints among them intersected with the
// union of its sparsity patterns among them (and, with a KV cache, kv_idx < seq_lens[b]);
// nullopt when it has none of them.
std::optional<expr::Node> masksAsExpression(const Spec& spec, std::span<const MaskKind> kinds);

// The spec's masks among `kinds` and its mask_mod, a score kept where both keep it; nullopt
// when it has neither.
std::optional<expr::Node> masksWithMaskMod(const Spec& spec, std::span<const MaskKind> kinds);

// The spec's score_mod; nullopt without one.
std::optional<expr::Node> scoreModAsExpression(const Spec& spec);

// softcap (cap * tanh(score / cap)), then ALiBi (score - slope_h * |qpos - kv_idx|), then the
// bias tensor (score + bias[b, h, q_idx, kv_idx]), on the scaled score; nullopt with none.
std::optional<expr::Node> modifiersAsExpression(const Spec& spec);

// The factor dropout puts on a probability where it weights v_j (not in the row sum): 1 / (1 -
// p) where random::dropoutKeeps keeps (b, h, q_idx, kv_idx), else 0; nullopt without dropout.
std::optional<expr::Node> dropoutAsExpression(const Spec& spec);

} // namespace attnc

#endif // ATTNC_COMPILER_SPEC_BUILTINEXPRESSIONS_H
