#include "Expr/ExprParse.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

namespace attnc::expr {
namespace {

// A character a name may hold after its first: letters, digits and '_'.
bool partOfName(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

constexpr std::array<std::string_view, 8> kIntVariables{"b",      "h",    "g",  "q_idx",
                                                        "kv_idx", "qpos", "Tq", "Tk"};

struct Function {
  std::string_view name;
  Op op;
  int arity;
};
constexpr std::array<Function, 13> kFunctions{{
    {"where", Op::Where, 3},
    {"min", Op::Min, 2},
    {"max", Op::Max, 2},
    {"abs", Op::Abs, 1},
    {"clamp", Op::Clamp, 3},
    {"floor", Op::Floor, 1},
    {"exp", Op::Exp, 1},
    {"log", Op::Log, 1},
    {"sqrt", Op::Sqrt, 1},
    {"tanh", Op::Tanh, 1},
    {"sigmoid", Op::Sigmoid, 1},
    {"bit", Op::Bit, 2},
    {"philox", Op::Philox, 5},
}};

bool numeric(Type t) { return t != Type::Bool; }

// The type arithmetic on a and b gives: int for two ints, else float.
Type promoted(Type a, Type b) { return a == Type::Int && b == Type::Int ? Type::Int : Type::Float; }

constexpr int kMaxNesting = 64;

class Parser {
public:
  Parser(std::string_view key, std::string_view text, Role role, const Scope& scope)
      : key_(key), text_(text), role_(role), scope_(scope) {}

  Node parse() {
    Node root = orExpr();
    skipSpace();
    if (at_ < text_.size())
      fail(at_, "expected an operator or the end, found '" + std::string(1, text_[at_]) + "'");
    if (role_ == Role::Mask && root.type != Type::Bool)
      fail(0, "a mask_mod is a bool (true keeps the score); this is " +
                  std::string(typeName(root.type)) + " (compare it, e.g. '... != 0')");
    if (role_ == Role::Score && root.type == Type::Bool)
      fail(0, "a score_mod is a number; this is a bool (use where(condition, score, ...))");
    return root;
  }

private:
  [[noreturn]] void fail(size_t offset, const std::string& problem) const {
    throw ExprError(std::string(key_) + "=\"" + std::string(text_) + "\": column " +
                    std::to_string(offset + 1) + ": " + problem);
  }

  void skipSpace() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_])))
      ++at_;
  }

  // Consumes `token` if the text continues with it (after spaces).
  bool accept(std::string_view token) {
    skipSpace();
    if (text_.substr(at_, token.size()) != token)
      return false;
    // The "!" of "!=" is no negation.
    if (token == "!" && text_.substr(at_ + 1).starts_with("="))
      return false;
    at_ += token.size();
    return true;
  }

  void expect(std::string_view token, std::string_view what) {
    if (!accept(token))
      fail(at_, "expected '" + std::string(token) + "' " + std::string(what));
  }

  Node make(Op op, Type type, int column, std::vector<Node> args = {}) {
    return Node{op, type, 0, 0, "", std::move(args), column};
  }

  void requireType(const Node& n, bool ok, const std::string& what) const {
    if (!ok)
      fail(static_cast<size_t>(n.column - 1), what + ", not " + std::string(typeName(n.type)));
  }

  Node orExpr() { return logical("||", Op::Or, &Parser::andExpr); }
  Node andExpr() { return logical("&&", Op::And, &Parser::compare); }

  // operand (token operand)*, left-associative, every operand a bool.
  Node logical(std::string_view token, Op op, Node (Parser::*operand)()) {
    Node left = (this->*operand)();
    const std::string rule = "'" + std::string(token) + "' joins bools";
    while (accept(token)) {
      Node right = (this->*operand)();
      requireType(left, left.type == Type::Bool, rule);
      requireType(right, right.type == Type::Bool, rule);
      left = make(op, Type::Bool, left.column, {std::move(left), std::move(right)});
    }
    return left;
  }

  Node compare() {
    Node left = sum();
    // Two-character operators first: "<" must not take the start of "<=".
    static constexpr std::array<std::pair<std::string_view, Op>, 6> kComparisons{{{"<=", Op::Le},
                                                                                  {">=", Op::Ge},
                                                                                  {"==", Op::Eq},
                                                                                  {"!=", Op::Ne},
                                                                                  {"<", Op::Lt},
                                                                                  {">", Op::Gt}}};
    for (auto [token, op] : kComparisons) {
      if (!accept(token))
        continue;
      Node right = sum();
      const bool equality = op == Op::Eq || op == Op::Ne;
      const bool ok = equality ? (left.type == Type::Bool) == (right.type == Type::Bool)
                               : numeric(left.type) && numeric(right.type);
      if (!ok)
        fail(static_cast<size_t>(right.column - 1),
             "'" + std::string(token) + "' compares " +
                 (equality ? std::string("two numbers or two bools") : std::string("numbers")) +
                 ", not " + std::string(typeName(left.type)) + " and " +
                 std::string(typeName(right.type)));
      return make(op, Type::Bool, left.column, {std::move(left), std::move(right)});
    }
    return left;
  }

  Node sum() {
    Node left = product();
    while (true) {
      Op op;
      if (accept("+"))
        op = Op::Add;
      else if (accept("-"))
        op = Op::Sub;
      else
        return left;
      Node right = product();
      left = arithmetic(op, std::move(left), std::move(right));
    }
  }

  Node product() {
    Node left = unary();
    while (true) {
      Op op;
      if (accept("*"))
        op = Op::Mul;
      else if (accept("//"))
        op = Op::FloorDiv;
      else if (accept("/"))
        op = Op::Div;
      else if (accept("%"))
        op = Op::Mod;
      else
        return left;
      Node right = unary();
      left = arithmetic(op, std::move(left), std::move(right));
    }
  }

  Node arithmetic(Op op, Node left, Node right) {
    const std::string symbol = op == Op::Add   ? "+"
                               : op == Op::Sub ? "-"
                               : op == Op::Mul ? "*"
                               : op == Op::Div ? "/"
                               : op == Op::FloorDiv ? "//"
                                                    : "%";
    requireType(left, numeric(left.type), "'" + symbol + "' takes numbers");
    requireType(right, numeric(right.type), "'" + symbol + "' takes numbers");
    if (op == Op::Mod || op == Op::FloorDiv) {
      requireType(left, left.type == Type::Int, "'" + symbol + "' takes ints");
      requireType(right, right.type == Type::Int, "'" + symbol + "' takes ints");
    }
    const Type type = op == Op::Div ? Type::Float : promoted(left.type, right.type);
    const int column = left.column;
    return make(op, type, column, {std::move(left), std::move(right)});
  }

  // Parentheses, calls, indexing and unary operators nest through here, at most kMaxNesting
  // deep, so that no text exhausts the parser's stack.
  Node unary() {
    if (nesting_ == kMaxNesting)
      fail(at_, "nested more than " + std::to_string(kMaxNesting) +
                    " deep (parentheses, calls, indices and unary operators)");
    ++nesting_;
    Node operand = prefixed();
    --nesting_;
    return operand;
  }

  Node prefixed() {
    skipSpace();
    const int column = static_cast<int>(at_) + 1;
    if (accept("-")) {
      Node operand = unary();
      requireType(operand, numeric(operand.type), "'-' negates a number");
      const Type type = operand.type;
      return make(Op::Neg, type, column, {std::move(operand)});
    }
    if (accept("!")) {
      Node operand = unary();
      requireType(operand, operand.type == Type::Bool, "'!' negates a bool");
      return make(Op::Not, Type::Bool, column, {std::move(operand)});
    }
    return primary();
  }

  Node primary() {
    skipSpace();
    const size_t start = at_;
    const int column = static_cast<int>(start) + 1;
    if (at_ >= text_.size())
      fail(at_, "expected a value, found the end");
    if (accept("(")) {
      Node inner = orExpr();
      expect(")", "to close the '(' at column " + std::to_string(column));
      return inner;
    }
    const char c = text_[at_];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.')
      return number();
    if (!std::isalpha(static_cast<unsigned char>(c)) && c != '_')
      fail(at_, "expected a value, found '" + std::string(1, c) + "'");
    while (at_ < text_.size() && partOfName(text_[at_]))
      ++at_;
    const std::string name(text_.substr(start, at_ - start));
    if (name == "true" || name == "false") {
      Node n = make(Op::BoolLiteral, Type::Bool, column);
      n.intValue = name == "true";
      return n;
    }
    if (accept("("))
      return call(name, start);
    if (accept("["))
      return index(name, start);
    return named(name, start);
  }

  Node number() {
    const size_t start = at_;
    while (at_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[at_])) || text_[at_] == '.' ||
            ((text_[at_] == '+' || text_[at_] == '-') && at_ > start &&
             (text_[at_ - 1] == 'e' || text_[at_ - 1] == 'E'))))
      ++at_;
    const std::string_view digits = text_.substr(start, at_ - start);
    Node n = make(Op::IntLiteral, Type::Int, static_cast<int>(start) + 1);
    const char* end = digits.data() + digits.size();
    if (digits.find_first_of(".eE") == std::string_view::npos) {
      // Kernels compute ints in 32 bits, so an int literal, as an int param, must fit them.
      auto [stop, error] = std::from_chars(digits.data(), end, n.intValue);
      if (stop != end || (error != std::errc() && error != std::errc::result_out_of_range))
        fail(start, "'" + std::string(digits) + "' is not a number");
      if (error != std::errc() || n.intValue > std::numeric_limits<int32_t>::max())
        fail(start, "'" + std::string(digits) +
                        "' does not fit 32 bits (kernels compute ints in 32 bits; an int literal "
                        "is at most 2147483647)");
      return n;
    }
    n.op = Op::FloatLiteral;
    n.type = Type::Float;
    double decimal = 0;
    auto [stop, error] = std::from_chars(digits.data(), end, decimal);
    if (stop != end || (error != std::errc() && error != std::errc::result_out_of_range))
      fail(start, "'" + std::string(digits) + "' is not a number");
    const std::optional<double> constant = f32Constant(decimal);
    if (error != std::errc() || !constant)
      fail(start, "'" + std::string(digits) +
                      "' is not an f32 (kernels compute floats in f32; a float literal is " +
                      std::string(kF32ConstantRange) + ")");
    n.floatValue = *constant;
    return n;
  }

  std::vector<Node> arguments(std::string_view close, const std::string& what) {
    std::vector<Node> args;
    if (accept(close))
      return args;
    do
      args.push_back(orExpr());
    while (accept(","));
    expect(close, "to close " + what);
    return args;
  }

  Node call(const std::string& name, size_t start) {
    const auto f = std::find_if(kFunctions.begin(), kFunctions.end(),
                                [&](const Function& fn) { return fn.name == name; });
    if (f == kFunctions.end()) {
      std::string known;
      for (const Function& fn : kFunctions)
        known += (known.empty() ? "" : ", ") + std::string(fn.name);
      fail(start, "unknown function '" + name + "'; the functions are " + known);
    }
    std::vector<Node> args = arguments(")", name + "(");
    if (static_cast<int>(args.size()) != f->arity)
      fail(start, name + " takes " + std::to_string(f->arity) + " argument" +
                      (f->arity == 1 ? "" : "s") + ", not " + std::to_string(args.size()));
    const int column = static_cast<int>(start) + 1;
    switch (f->op) {
    case Op::Where: {
      requireType(args[0], args[0].type == Type::Bool, "where's condition is a bool");
      const bool bools = args[1].type == Type::Bool;
      if (bools != (args[2].type == Type::Bool))
        fail(static_cast<size_t>(args[2].column - 1),
             "where's two values are both numbers or both bools, not " +
                 std::string(typeName(args[1].type)) + " and " +
                 std::string(typeName(args[2].type)));
      const Type type = bools ? Type::Bool : promoted(args[1].type, args[2].type);
      return make(Op::Where, type, column, std::move(args));
    }
    case Op::Floor:
      requireType(args[0], numeric(args[0].type), "floor takes a number");
      return make(Op::Floor, Type::Int, column, std::move(args));
    case Op::Bit:
      for (const Node& a : args)
        requireType(a, a.type == Type::Int, "bit takes ints: bit(word, index)");
      return make(Op::Bit, Type::Bool, column, std::move(args));
    case Op::Philox: {
      if (!scope_.philoxKey)
        fail(start, "philox draws under the spec's seed; add seed=N");
      for (const Node& a : args)
        requireType(a, a.type == Type::Int, "philox takes ints: philox(c0, c1, c2, c3, word)");
      Node draw = make(Op::Philox, Type::Int, column, std::move(args));
      draw.intValue = static_cast<int64_t>(*scope_.philoxKey);
      return draw;
    }
    default:
      break;
    }
    Type type = Type::Int;
    for (const Node& a : args) {
      requireType(a, numeric(a.type), name + " takes numbers");
      type = promoted(type, a.type);
    }
    const bool transcendental = f->op == Op::Exp || f->op == Op::Log || f->op == Op::Sqrt ||
                                f->op == Op::Tanh || f->op == Op::Sigmoid;
    return make(f->op, transcendental ? Type::Float : type, column, std::move(args));
  }

  Node index(const std::string& name, size_t start) {
    const auto aux = std::find_if(scope_.aux.begin(), scope_.aux.end(),
                                  [&](const Scope::AuxTensor& t) { return t.name == name; });
    if (aux == scope_.aux.end())
      fail(start, "'" + name + "' is not an aux tensor of the spec" +
                      (scope_.aux.empty()
                           ? std::string(" (it declares none: aux=\"name:i32[B,Tk]\")")
                           : "; declared: " + auxNames()));
    std::vector<Node> indices = arguments("]", name + "[");
    if (static_cast<int>(indices.size()) != aux->rank)
      fail(start, name + " has " + std::to_string(aux->rank) + " dimension" +
                      (aux->rank == 1 ? "" : "s") + ", indexed with " +
                      std::to_string(indices.size()));
    for (const Node& i : indices)
      requireType(i, i.type == Type::Int, "an index of " + name + " is an int");
    Node n = make(Op::Aux, aux->elementType, static_cast<int>(start) + 1, std::move(indices));
    n.name = name;
    return n;
  }

  Node named(const std::string& name, size_t start) {
    const int column = static_cast<int>(start) + 1;
    if (name == "score") {
      if (role_ == Role::Mask)
        fail(start, "a mask_mod cannot read score (masks decide before scores exist; use "
                    "score_mod with where(...))");
      Node n = make(Op::Variable, Type::Float, column);
      n.name = name;
      return n;
    }
    if (std::find(kIntVariables.begin(), kIntVariables.end(), name) != kIntVariables.end()) {
      Node n = make(Op::Variable, Type::Int, column);
      n.name = name;
      return n;
    }
    for (const Scope::Param& p : scope_.params)
      if (p.name == name) {
        Node n = make(Op::Param, p.type, column);
        n.name = name;
        return n;
      }
    for (const Scope::AuxTensor& t : scope_.aux)
      if (t.name == name)
        fail(start, "aux tensor '" + name + "' is read with indices: " + name + "[...]");
    std::string known;
    for (std::string_view v : kIntVariables)
      known += std::string(known.empty() ? "" : ", ") + std::string(v);
    if (role_ == Role::Score)
      known += ", score";
    for (const Scope::Param& p : scope_.params)
      known += ", " + p.name;
    fail(start, "unknown name '" + name + "'; the names are " + known +
                    (scope_.params.empty() ? " (named scalars come from params=\"name=value\")"
                                           : ""));
  }

  std::string auxNames() const {
    std::string names;
    for (const Scope::AuxTensor& t : scope_.aux)
      names += (names.empty() ? "" : ", ") + t.name;
    return names;
  }

  std::string_view key_, text_;
  Role role_;
  const Scope& scope_;
  int nesting_ = 0;
  size_t at_ = 0;
};

} // namespace

Node parseExpr(std::string_view key, std::string_view text, Role role, const Scope& scope) {
  return Parser(key, text, role, scope).parse();
}

bool mentionsName(std::string_view text, std::string_view name) {
  for (size_t at = text.find(name); at != std::string_view::npos;
       at = text.find(name, at + 1)) {
    const size_t end = at + name.size();
    if ((at == 0 || !partOfName(text[at - 1])) && (end == text.size() || !partOfName(text[end])))
      return true;
  }
  return false;
}

bool isLanguageName(std::string_view name) {
  return name == "score" || name == "true" || name == "false" ||
         std::find(kIntVariables.begin(), kIntVariables.end(), name) != kIntVariables.end() ||
         std::any_of(kFunctions.begin(), kFunctions.end(),
                     [&](const Function& f) { return f.name == name; });
}

} // namespace attnc::expr
