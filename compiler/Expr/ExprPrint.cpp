#include "Expr/ExprPrint.h"

#include <charconv>

namespace attnc::expr {
namespace {

// Binding strength, loosest first; a child binding more loosely than its parent needs
// parentheses (on the right of a left-associative operator, or beside a comparison, also one
// binding as loosely).
int precedence(Op op) {
  switch (op) {
  case Op::Or:
    return 1;
  case Op::And:
    return 2;
  case Op::Lt:
  case Op::Le:
  case Op::Gt:
  case Op::Ge:
  case Op::Eq:
  case Op::Ne:
    return 3;
  case Op::Add:
  case Op::Sub:
    return 4;
  case Op::Mul:
  case Op::Div:
  case Op::Mod:
  case Op::FloorDiv:
    return 5;
  case Op::Neg:
  case Op::Not:
    return 6;
  default:
    return 7; // literals, names, calls, indexing
  }
}

std::string_view symbol(Op op) {
  switch (op) {
  case Op::Or:
    return "||";
  case Op::And:
    return "&&";
  case Op::Lt:
    return "<";
  case Op::Le:
    return "<=";
  case Op::Gt:
    return ">";
  case Op::Ge:
    return ">=";
  case Op::Eq:
    return "==";
  case Op::Ne:
    return "!=";
  case Op::Add:
    return "+";
  case Op::Sub:
    return "-";
  case Op::Mul:
    return "*";
  case Op::Div:
    return "/";
  case Op::Mod:
    return "%";
  case Op::FloorDiv:
    return "//";
  case Op::Neg:
    return "-";
  case Op::Not:
    return "!";
  case Op::Where:
    return "where";
  case Op::Min:
    return "min";
  case Op::Max:
    return "max";
  case Op::Abs:
    return "abs";
  case Op::Clamp:
    return "clamp";
  case Op::Floor:
    return "floor";
  case Op::Exp:
    return "exp";
  case Op::Log:
    return "log";
  case Op::Sqrt:
    return "sqrt";
  case Op::Tanh:
    return "tanh";
  case Op::Sigmoid:
    return "sigmoid";
  case Op::Bit:
    return "bit";
  case Op::Philox:
    return "philox";
  default:
    return ""; // literals and names print their value or name
  }
}


std::string joined(const std::vector<Node>& args) {
  std::string text;
  for (const Node& a : args)
    text += (text.empty() ? "" : ", ") + print(a);
  return text;
}

std::string child(const Node& node, int parent, bool looseAlso) {
  const int own = precedence(node.op);
  const bool parenthesize = own < parent || (looseAlso && own == parent);
  return parenthesize ? "(" + print(node) + ")" : print(node);
}

} // namespace

std::string_view typeName(Type type) {
  switch (type) {
  case Type::Int:
    return "int";
  case Type::Float:
    return "float";
  case Type::Bool:
    return "bool";
  }
  return "unknown"; // not reached: every type is named above
}

std::string print(const Node& node) {
  switch (node.op) {
  case Op::IntLiteral:
    return std::to_string(node.intValue);
  case Op::FloatLiteral:
    return floatText(node.floatValue);
  case Op::BoolLiteral:
    return node.intValue ? "true" : "false";
  case Op::Variable:
  case Op::Param:
    return node.name;
  case Op::Aux:
    return node.name + "[" + joined(node.args) + "]";
  case Op::Neg:
  case Op::Not:
    return std::string(symbol(node.op)) + child(node.args[0], precedence(node.op), false);
  default:
    break;
  }
  const int own = precedence(node.op);
  if (own == 7) // a function call
    return std::string(symbol(node.op)) + "(" + joined(node.args) + ")";
  const bool comparison = own == 3;
  return child(node.args[0], own, comparison) + " " + std::string(symbol(node.op)) + " " +
         child(node.args[1], own, true);
}

std::string floatText(double value) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, static_cast<float>(value));
  std::string text(buffer, result.ptr);
  if (text.find_first_of(".e") == std::string::npos)
    text += ".0"; // stays a float when parsed again
  return text;
}

} // namespace attnc::expr
