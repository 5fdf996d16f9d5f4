// The built-in sparsity patterns written in the expression language (docs/spec.md,
// Expressions), with the spec's parameters as literals: what the f64 reference evaluates, and
// what a code generator with no lowering of its own for a pattern compiles through its
// expression path. Each is the predicate of Semantics/Masks.h (which the Halide backend
// instantiates), element for element: tests/unit/PatternExpressionsTest.cpp. block_sparse reads the
// kernel's `block_layout` input as an aux tensor of that name, [H|1, ceil(Tq/block),
// ceil(Tk/block)] (a head extent of 1 broadcasts: aux reads clamp their indices); BigBird draws
// its random blocks with philox() under the spec's seed in BigBird's stream.
#ifndef ATTNC_COMPILER_SPEC_PATTERNEXPRESSIONS_H
#define ATTNC_COMPILER_SPEC_PATTERNEXPRESSIONS_H

#include "Expr/Expr.h"
#include "Spec/Spec.h"

#include <optional>
#include <span>

namespace attnc {

// The patterns written here: all the sparsity patterns.
inline constexpr MaskKind kExpressiblePatterns[] = {MaskKind::Window,  MaskKind::Global,
                                                    MaskKind::Strided, MaskKind::Dilated,
                                                    MaskKind::BlockSparse, MaskKind::BigBird};

// The union of the spec's patterns among `kinds` (sparsity patterns unite), as a mask; nullopt
// when the spec has none of them.
std::optional<expr::Node> patternsAsExpression(const Spec& spec, std::span<const MaskKind> kinds);

} // namespace attnc

#endif // ATTNC_COMPILER_SPEC_PATTERNEXPRESSIONS_H
