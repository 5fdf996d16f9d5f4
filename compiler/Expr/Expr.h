// Attention expressions: the score and mask modifiers a spec may spell out (score_mod,
// mask_mod), as one typed tree that every consumer reads: the f64 reference evaluates it
// (ExprEval.h), code generators translate it, and the spec prints it in canonical form
// (ExprPrint.h). ExprParse.h turns text into a tree, checking names and types.
//
// Types: int (64-bit and wrapping in the reference, 32-bit in kernels, so a literal fits 32 bits),
// float (computed in f64 by the reference, each constant an f32: f32Constant) and bool.
// Arithmetic on two ints stays int, a float operand makes it float; `/` always divides as floats
// and `%` takes ints only, with the divisor's sign (floor modulo, as Python's), so that
// `(q_idx - kv_idx) % 4` means what a reader expects for negative differences; `x % 0` is 0, so
// no kernel traps. `//` divides ints to the floor, the quotient that goes with `%`
// (x == m * (x // m) + x % m), and `x // 0` is 0: block indices such as `q_idx // 64`. floor
// takes a number to an int. bit(x, i) reads one bit of an int, for masks packed into the bits of
// an aux tensor.
#ifndef ATTNC_COMPILER_EXPR_EXPR_H
#define ATTNC_COMPILER_EXPR_EXPR_H

#include "Support/Errors.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attnc::expr {

enum class Type { Int, Float, Bool };
std::string_view typeName(Type type); // "int", "float", "bool"

enum class Op {
  IntLiteral,   // value: intValue
  FloatLiteral, // value: floatValue
  BoolLiteral,  // value: intValue (0 or 1)
  Variable,     // name: b, h, g, q_idx, kv_idx, qpos, Tq, Tk, score
  Param,        // name: a named scalar of the spec's params
  Aux,          // name: an auxiliary tensor; args: its indices
  Neg,
  Not,
  Add,
  Sub,
  Mul,
  Div,
  Mod,
  FloorDiv, // `//`
  Lt,
  Le,
  Gt,
  Ge,
  Eq,
  Ne,
  And,
  Or,
  Where, // where(condition, then, else)
  Min,
  Max,
  Abs,
  Clamp, // clamp(x, lo, hi)
  Floor, // float -> int
  Exp,
  Log,
  Sqrt,
  Tanh,
  Sigmoid,
  Bit, // bit(x, i): bit i of int x (two's complement, 64 bits); false for i outside [0, 63]
  // philox(c0, c1, c2, c3, n): word n mod 4 of Philox4x32-10 (Semantics/Random.h) at counter
  // (c0, c1, c2, c3), each taken mod 2^32, under the key in intValue (key0 | key1 << 32), read
  // as a signed 32-bit int so that 32-bit kernels hold it exactly. The built-ins' random draws
  // (BigBird's blocks, dropout's keeps) and a spec's own, each under its stream's key.
  Philox,
};

struct Node {
  Op op;
  Type type;
  int64_t intValue = 0;
  double floatValue = 0;
  std::string name;
  std::vector<Node> args;
  int column = 0; // 1-based, where the node starts in its text: for messages
};

// What an expression computes: a score modifier (a number, which may read `score`) or a mask
// (a bool: true keeps the score).
enum class Role { Score, Mask };

// The language's int +, -, * and negation wrap in two's complement: computed on uint64_t (signed
// overflow is undefined in C++), then read back as signed.
inline int64_t wrapped(uint64_t v) { return static_cast<int64_t>(v); }

// A float constant (a literal, or a float param) is the f32 nearest its decimal, as kernels hold
// it, so that the reference and the tile bounds compute with the kernels' value: `x >= 0.7`
// keeps an aux element that holds 0.7 in f32 in every backend (0.7 in f64 is above it). Nullopt
// for a decimal that no normal f32 holds (past f32's range, or nonzero and below its normal
// numbers, which kernels may flush to 0): such a constant is refused.
inline std::optional<double> f32Constant(double decimal) {
  const float nearest = static_cast<float>(decimal);
  if (decimal != 0 && !std::isnormal(nearest))
    return std::nullopt;
  return nearest;
}
inline constexpr std::string_view kF32ConstantRange =
    "0 or a normal f32 number, at least 1.1754944e-38 and at most 3.4028235e38 in size";

// Calls f with a comparison op (Lt, Le, Gt, Ge, Eq, Ne) as its function object, so that a loop
// over many elements picks the comparison once.
template <typename F> decltype(auto) withComparison(Op op, F&& f) {
  switch (op) {
  case Op::Lt: return f(std::less<>());
  case Op::Le: return f(std::less_equal<>());
  case Op::Gt: return f(std::greater<>());
  case Op::Ge: return f(std::greater_equal<>());
  case Op::Eq: return f(std::equal_to<>());
  default: return f(std::not_equal_to<>());
  }
}

// The language's `%`: floor modulo, the result taking the divisor's sign; x % 0 is 0. Written
// without the overflows of C++'s `%` (INT64_MIN % -1), so the reference and the bounds share it.
inline int64_t floorModulo(int64_t x, int64_t m) {
  if (m == 0 || m == -1) // every x is a multiple of -1
    return 0;
  const int64_t r = x % m;
  return r != 0 && ((r < 0) != (m < 0)) ? r + m : r;
}

// The language's `//`: floor(x / m), and 0 for m = 0; -x (wrapping) for m = -1, where C++'s
// division overflows (INT64_MIN / -1).
inline int64_t floorDivide(int64_t x, int64_t m) {
  if (m == 0)
    return 0;
  if (m == -1)
    return static_cast<int64_t>(0 - static_cast<uint64_t>(x));
  const int64_t q = x / m, r = x % m;
  return r != 0 && ((r < 0) != (m < 0)) ? q - 1 : q;
}

// A bad expression: the message names the key, the expression, the column and the problem.
class ExprError : public UsageError {
public:
  using UsageError::UsageError;
};

} // namespace attnc::expr

#endif // ATTNC_COMPILER_EXPR_EXPR_H
