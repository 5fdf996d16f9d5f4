// Questions the code generators ask of an expression tree before translating it: whether some
// node under it passes a test (reads kv_idx, draws from Philox, reads a tensor), and how it
// reads the rows or the keys (only as blocks, q_idx // 64, or as they are).
#ifndef ATTNC_COMPILER_EXPR_EXPRQUERIES_H
#define ATTNC_COMPILER_EXPR_EXPRQUERIES_H

#include "Expr/Expr.h"

#include <cstdint>
#include <functional>
#include <string_view>

namespace attnc::expr {

// Whether `node` or a node under it passes `test`.
bool contains(const Node& node, const std::function<bool(const Node&)>& test);

// Whether `node` reads variable `name`.
bool reads(const Node& node, std::string_view name);

// B when every read of `index` (q_idx, with qpos read as q_idx plus the alignment's offset, or
// kv_idx) under `node` is index // B for one int literal B > 1: the node then has one value
// per block of B rows or keys. 1 when some read is another, 0 when it reads none.
int64_t blockOf(const Node& node, std::string_view index);

} // namespace attnc::expr

#endif // ATTNC_COMPILER_EXPR_EXPRQUERIES_H
