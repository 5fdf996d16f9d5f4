// Derivatives of a score modifier (score_mod), taken symbolically by the chain rule over the
// expression tree: d score_mod / d score, which the backward pass multiplies into the scores'
// gradient, and d score_mod / d aux[i...] for each read of a float aux tensor (a learnable bias
// table), whose gradient sums those products over the scores that read each element.
//
// The result is an expression of the same language (it reads the same variables, params and
// aux elements), so the reference evaluates it (ExprEval.h) and code generators translate it
// like any other. Where a function has no derivative, PyTorch's autograd conventions hold:
//   where(c, a, b)   the gradient goes to the branch taken;
//   min, max         to the smaller (larger) operand, half to each where they are equal
//                    (torch.minimum, torch.maximum);
//   abs              sign(x): 0 at x = 0;
//   clamp(x, lo, hi) to x where lo <= x <= hi (both ends included), to lo where x < lo < hi,
//                    to hi where x > hi or hi < lo (torch.clamp with tensor bounds);
//   floor, %, //, comparisons, bit, philox: ints and bools, derivative 0;
//   sqrt and log at 0 give infinity, as torch.sqrt and torch.log do.
#ifndef ATTNC_COMPILER_EXPR_EXPRDERIVE_H
#define ATTNC_COMPILER_EXPR_EXPRDERIVE_H

#include "Expr/Expr.h"

#include <vector>

namespace attnc::expr {

// d expr / d score: a float expression (0.0 when expr does not read the score).
Node derivativeByScore(const Node& expr);

// One read of a float aux tensor in a score modifier: the read (an Aux node: its tensor and
// index expressions) and d expr / d (the element it reads), holding its other reads fixed.
struct AuxPartial {
  Node read;
  Node derivative;
};

// The partials of every float aux read of expr, in the order the reads appear. Two reads of
// the same element contribute both partials to its gradient.
std::vector<AuxPartial> derivativesByAux(const Node& expr);

} // namespace attnc::expr

#endif // ATTNC_COMPILER_EXPR_EXPRDERIVE_H
