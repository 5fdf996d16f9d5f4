#include "Expr/ExprQueries.h"

#include <algorithm>

namespace attnc::expr {

bool contains(const Node& node, const std::function<bool(const Node&)>& test) {
  return test(node) || std::any_of(node.args.begin(), node.args.end(),
                                   [&](const Node& a) { return contains(a, test); });
}

bool reads(const Node& node, std::string_view name) {
  return contains(node, [&](const Node& n) { return n.op == Op::Variable && n.name == name; });
}

int64_t blockOf(const Node& node, std::string_view index) {
  int64_t block = 0;
  bool plain = false;
  const std::function<void(const Node&)> visit = [&](const Node& n) {
    if (n.op == Op::FloorDiv && n.args[0].op == Op::Variable && n.args[0].name == index &&
        n.args[1].op == Op::IntLiteral && n.args[1].intValue > 1 &&
        n.args[1].intValue <= INT32_MAX && (block == 0 || block == n.args[1].intValue)) {
      block = n.args[1].intValue;
      return;
    }
    if (n.op == Op::Variable && (n.name == index || (index == "q_idx" && n.name == "qpos")))
      plain = true;
    for (const Node& a : n.args)
      visit(a);
  };
  visit(node);
  return plain ? 1 : block;
}

} // namespace attnc::expr
