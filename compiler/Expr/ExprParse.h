// Text to a checked expression tree:
//   expr    := or;  or := and ("||" and)*;  and := compare ("&&" compare)*
//   compare := sum (("<" | "<=" | ">" | ">=" | "==" | "!=") sum)?
//   sum     := product (("+" | "-") product)*
//   product := unary (("*" | "/" | "//" | "%") unary)*
//   unary   := ("-" | "!") unary | primary
//   primary := number | "true" | "false" | name | name "(" expr ("," expr)* ")"
//            | name "[" expr ("," expr)* "]" | "(" expr ")"
// Names are the variables (b, h, g, q_idx, kv_idx, qpos, Tq, Tk; score in a score modifier),
// the spec's params, its aux tensors (indexed once per dimension, with ints) and the functions
// where, min, max, abs, clamp, floor, exp, log, sqrt, tanh, sigmoid, bit.
#ifndef ATTNC_COMPILER_EXPR_EXPRPARSE_H
#define ATTNC_COMPILER_EXPR_EXPRPARSE_H

#include "Expr/Expr.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attnc::expr {

// What a spec declares besides the variables: named scalars and auxiliary tensors.
struct Scope {
  struct Param {
    std::string name;
    Type type; // int when written as an integer, else float
  };
  struct AuxTensor {
    std::string name;
    Type elementType; // int (i32) or float (f32)
    int rank;
  };
  std::vector<Param> params;
  std::vector<AuxTensor> aux;
  // The Philox key philox(...) draws under (Op::Philox); without one (a spec without seed)
  // philox is refused.
  std::optional<uint64_t> philoxKey;
};

// Parses `text`, the value of spec key `key` (score_mod or mask_mod). Throws ExprError naming
// the key, the text, the 1-based column and the problem: a character or token out of place, an
// unknown name (with the names allowed), a type mismatch, a wrong number of arguments or
// indices, `score` in a mask, or a result of the wrong type for `role`.
Node parseExpr(std::string_view key, std::string_view text, Role role, const Scope& scope);

// Whether `text` names function `name` (a whole word: the language's names cannot be a param's
// or an aux tensor's, so in a valid expression it is a call), without parsing it.
bool mentionsName(std::string_view text, std::string_view name);

// Whether `name` is the language's own (a variable, function, true or false), so a param or aux
// tensor cannot take it.
bool isLanguageName(std::string_view name);

} // namespace attnc::expr

#endif // ATTNC_COMPILER_EXPR_EXPRPARSE_H
