// The built-in sparsity patterns written in the expression language (docs/spec.md,
// Expressions), with the spec's parameters as literals: what a code generator that has no
// lowering of its own for a pattern compiles instead, through its expression path. Each is the
// predicate of Semantics/Masks.h, so both agree element for element.
#ifndef ATTNC_COMPILER_SPEC_PATTERNEXPRESSIONS_H
#define ATTNC_COMPILER_SPEC_PATTERNEXPRESSIONS_H

#include "Expr/Expr.h"
#include "Spec/Spec.h"

#include <optional>
#include <span>

namespace attnc {

// The union of the spec's patterns among `kinds` (window, global: sparsity patterns unite), as
// a mask; nullopt when the spec has none of them. (Strided and dilated are not here: written
// as expressions they would be evaluated element by element, where the Halide backend gathers
// each residue class into dense tiles.)
std::optional<expr::Node> patternsAsExpression(const Spec& spec, std::span<const MaskKind> kinds);

} // namespace attnc

#endif // ATTNC_COMPILER_SPEC_PATTERNEXPRESSIONS_H
