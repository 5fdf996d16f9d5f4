// An expression's canonical text: the tree printed with single spaces around binary operators,
// parentheses only where precedence needs them, and each literal in one spelling (ints in
// decimal, floats in the shortest form that reads back as the same f32, with a '.' or an
// exponent). Parsing the canonical text gives the same tree, so specs that differ only in
// spacing, redundant parentheses or literal spelling print, and hash, alike.
#ifndef ATTNC_COMPILER_EXPR_EXPRPRINT_H
#define ATTNC_COMPILER_EXPR_EXPRPRINT_H

#include "Expr/Expr.h"

#include <string>

namespace attnc::expr {

std::string print(const Node& node);

// A float literal's canonical spelling: the shortest digits that read back as the f32 nearest
// `value` (every float constant is one: f32Constant), with a '.' or an exponent so that it reads
// back as a float.
std::string floatText(double value);

} // namespace attnc::expr

#endif // ATTNC_COMPILER_EXPR_EXPRPRINT_H
