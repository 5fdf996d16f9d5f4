#include "Spec/SpecExpressions.h"

#include "Abi/Arguments.h"
#include "Abi/Identifiers.h"
#include "Expr/ExprIndexCheck.h"
#include "Expr/ExprParse.h"
#include "Expr/ExprPrint.h"
#include "Expr/ExprQueries.h"
#include "Semantics/Random.h"
#include "Spec/SpecKeys.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

namespace attnc {
namespace {

constexpr std::string_view kAuxAllowed =
    "space-separated name:type[dims], type i32 or f32, 1 to 4 dims each B, Tq, Tk, heads, "
    "kv_heads or an integer in [1, 2147483647] (aux=\"doc:i32[B,Tk] rel:f32[heads,257]\")";
constexpr std::string_view kParamsAllowed =
    "space-separated name=number (params=\"cap=30 width=128\"): an integer within 32 bits, or a "
    "real that is an f32";

bool isIdentifier(std::string_view name) {
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_'))
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

[[noreturn]] void failName(std::string_view key, std::string_view value, std::string_view name,
                           const std::string& why) {
  throw SpecError(std::string(key) + "=\"" + std::string(value) + "\": '" + std::string(name) +
                  "' " + why + "; choose another");
}

// A param or aux tensor's name: an identifier that neither the language nor a kernel argument
// of any spec uses, so that a spec stays valid as its other keys change.
void checkName(std::string_view key, std::string_view value, std::string_view name) {
  if (!isIdentifier(name))
    throw SpecError(std::string(key) + "=\"" + std::string(value) + "\": '" + std::string(name) +
                    "' is not a name (a letter or _, then letters, digits or _)");
  if (expr::isLanguageName(name))
    failName(key, value, name, "is a name of the expression language (a variable or function)");
  if (builtinArgumentNames().count(std::string(name)))
    failName(key, value, name, "is the name of a kernel argument (of this spec or another)");
  if (name.starts_with(kGradientPrefix))
    failName(key, value, name, "begins as the backward's gradients are named (grad_<argument>)");
}

// An aux tensor's name is a kernel argument's too, so a linked library's header declares it as a
// C++ member and parameter (Link/LinkedHeader.h): a name a program may declare, and not one the
// call passes beside the arguments.
void checkAuxName(std::string_view value, std::string_view name) {
  checkName("aux", value, name);
  if (auto problem = cIdentifierProblem(name))
    failName("aux", value, name,
             "cannot be a C++ member of a linked library's header: " + *problem);
  if (std::find(std::begin(kCallParameters), std::end(kCallParameters), name) !=
      std::end(kCallParameters))
    failName("aux", value, name, "is a parameter of the kernel's call (num_threads, stream)");
}

std::string printNumber(const expr::Value& v) {
  return v.type == expr::Type::Int ? std::to_string(v.i) : expr::floatText(v.f);
}

bool knownDim(std::string_view dim) {
  if (dim == "B" || dim == "Tq" || dim == "Tk" || dim == "heads" || dim == "kv_heads")
    return true;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(dim.data(), dim.data() + dim.size(), v);
  return ec == std::errc() && end == dim.data() + dim.size() && v >= 1 && v <= INT32_MAX &&
         dim[0] != '0';
}

expr::Affine affineDim(const Spec& s, const std::string& dim) {
  if (dim == "B")
    return {0, 1, 0, 0};
  if (dim == "Tq")
    return {0, 0, 1, 0};
  if (dim == "Tk")
    return {0, 0, 0, 1};
  if (dim == "heads")
    return {s.heads, 0, 0, 0};
  if (dim == "kv_heads")
    return {s.kvHeads, 0, 0, 0};
  return {std::stoll(dim), 0, 0, 0};
}

} // namespace

std::vector<SpecParam> parseParams(std::string_view text) {
  auto fail = [&](const std::string& why) {
    throw SpecError("params=\"" + std::string(text) + "\": " + why + "; expected " +
                    std::string(kParamsAllowed));
  };
  std::vector<SpecParam> params;
  for (std::string_view field : specWords(text)) {
    const size_t eq = field.find('=');
    if (eq == std::string_view::npos)
      fail("'" + std::string(field) + "' is not name=number");
    const std::string_view name = field.substr(0, eq), number = field.substr(eq + 1);
    checkName("params", text, name);
    const char* first = number.data();
    const char* last = number.data() + number.size();
    int64_t i = 0;
    double f = 0;
    expr::Value value{expr::Type::Int};
    if (auto [end, ec] = std::from_chars(first, last, i); ec == std::errc() && end == last) {
      if (i < INT32_MIN || i > INT32_MAX)
        fail(std::string(name) + "=" + std::string(number) + " does not fit 32 bits");
      value.i = i;
    } else if (auto [end2, ec2] = std::from_chars(first, last, f);
               (ec2 == std::errc() || ec2 == std::errc::result_out_of_range) && end2 == last) {
      const std::optional<double> constant = expr::f32Constant(f);
      if (ec2 != std::errc() || !constant)
        fail(std::string(name) + "=" + std::string(number) + " is not an f32 (a float param is " +
             std::string(expr::kF32ConstantRange) + ")");
      value = {expr::Type::Float, 0, *constant};
    } else {
      fail("'" + std::string(number) + "' is not a number");
    }
    for (const SpecParam& p : params)
      if (p.name == name)
        fail("'" + std::string(name) + "' is given twice");
    params.push_back({std::string(name), value});
  }
  if (params.empty())
    fail("no params");
  std::sort(params.begin(), params.end(),
            [](const SpecParam& a, const SpecParam& b) { return a.name < b.name; });
  return params;
}

std::string printParams(const std::vector<SpecParam>& params) {
  std::string text;
  for (const SpecParam& p : params)
    text += (text.empty() ? "" : " ") + p.name + "=" + printNumber(p.value);
  return text;
}

std::vector<AuxTensor> parseAux(std::string_view text) {
  auto fail = [&](const std::string& why) {
    throw SpecError("aux=\"" + std::string(text) + "\": " + why + "; expected " +
                    std::string(kAuxAllowed));
  };
  std::vector<AuxTensor> aux;
  size_t at = 0;
  auto skipSpace = [&] {
    while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at])))
      ++at;
  };
  // Up to (not including) the first of `stops` or a space; the stop must follow.
  auto until = [&](std::string_view stops) {
    skipSpace();
    const size_t start = at;
    while (at < text.size() && stops.find(text[at]) == std::string_view::npos &&
           !std::isspace(static_cast<unsigned char>(text[at])))
      ++at;
    const std::string_view word = text.substr(start, at - start);
    skipSpace();
    if (at == text.size() || stops.find(text[at]) == std::string_view::npos)
      fail("after '" + std::string(text.substr(0, at)) + "' expected one of '" +
           std::string(stops) + "'");
    ++at;
    return word;
  };
  while (skipSpace(), at < text.size()) {
    AuxTensor tensor;
    const std::string_view name = until(":");
    checkAuxName(text, name);
    tensor.name = std::string(name);
    const std::string_view type = until("[");
    if (type != "i32" && type != "f32")
      fail(tensor.name + ": element type '" + std::string(type) + "' is not i32 or f32");
    tensor.elementType = type == "i32" ? expr::Type::Int : expr::Type::Float;
    while (true) {
      const std::string_view dim = until(",]");
      if (!knownDim(dim))
        fail(tensor.name + ": dim '" + std::string(dim) + "' is not B, Tq, Tk, heads, kv_heads "
                                                          "or an integer in [1, 2147483647]");
      tensor.dims.emplace_back(dim);
      if (text[at - 1] == ']')
        break;
    }
    if (tensor.dims.size() > 4)
      fail(tensor.name + " has " + std::to_string(tensor.dims.size()) + " dims; at most 4");
    for (const AuxTensor& t : aux)
      if (t.name == tensor.name)
        fail("'" + tensor.name + "' is declared twice");
    aux.push_back(std::move(tensor));
  }
  if (aux.empty())
    fail("no tensors");
  return aux;
}

std::string printAux(const std::vector<AuxTensor>& aux) {
  std::string text;
  for (const AuxTensor& t : aux) {
    text += (text.empty() ? "" : " ") + t.name +
            (t.elementType == expr::Type::Int ? ":i32[" : ":f32[");
    for (size_t d = 0; d < t.dims.size(); ++d)
      text += (d ? "," : "") + t.dims[d];
    text += "]";
  }
  return text;
}

namespace {

// With ragged queries sequences run in calls of their own (b counts from the call's first), so `b` may only
// pick an aux tensor's row along its first dimension B, which the runtime hands each call.
void checkBatchReads(std::string_view key, const std::string& text, const expr::Node& node,
                     const Spec& s, const expr::Node* parent = nullptr, size_t index = 0) {
  if (node.op == expr::Op::Variable && node.name == "b") {
    const bool auxRow = parent && parent->op == expr::Op::Aux && index == 0 &&
                        std::any_of(s.aux.begin(), s.aux.end(), [&](const AuxTensor& t) {
                          return t.name == parent->name && t.dims.front() == "B";
                        });
    if (!auxRow)
      throw SpecError(std::string(key) + "=\"" + text + "\" at column " +
                      std::to_string(node.column) +
                      ": with ragged_q=true, b may only be the first index of an aux tensor "
                      "whose first dimension is B (sequences run in calls of their own)");
  }
  for (size_t a = 0; a < node.args.size(); ++a)
    checkBatchReads(key, text, node.args[a], s, &node, a);
}

// Whether score_mod or mask_mod reads the param (op Param) or aux tensor (op Aux) `name`.
bool read(const Spec& s, expr::Op op, const std::string& name) {
  const auto test = [&](const expr::Node& n) { return n.op == op && n.name == name; };
  return (s.scoreMod.tree && expr::contains(*s.scoreMod.tree, test)) ||
         (s.maskMod.tree && expr::contains(*s.maskMod.tree, test));
}

// A param or aux tensor that no expression reads is an error: the aux tensor would still be an
// argument every call passes, and either changes the spec's hash, not what it computes.
void checkEveryNameRead(const Spec& s) {
  for (const SpecParam& p : s.params)
    if (!read(s, expr::Op::Param, p.name))
      throw SpecError("params=\"" + printParams(s.params) + "\": no expression reads '" + p.name +
                      "'; read it in score_mod or mask_mod, or remove it");
  for (const AuxTensor& t : s.aux)
    if (!read(s, expr::Op::Aux, t.name))
      throw SpecError("aux=\"" + printAux(s.aux) + "\": no expression reads '" + t.name +
                      "' (it would be a kernel argument); read it in score_mod or mask_mod, or "
                      "remove it");
}

} // namespace

void resolveExpressions(Spec& s) {
  for (const SpecParam& p : s.params)
    for (const AuxTensor& t : s.aux)
      if (p.name == t.name)
        throw SpecError("'" + p.name + "' is both a param and an aux tensor; names are unique");
  expr::Scope scope;
  if (s.seed)
    scope.philoxKey = random::streamKey(*s.seed, random::kExpressionStream);
  expr::IndexFacts facts;
  facts.heads = s.heads;
  facts.kvHeads = s.kvHeads;
  facts.bottomRight = s.causalAlign == CausalAlign::BottomRight;
  for (const SpecParam& p : s.params) {
    scope.params.push_back({p.name, p.value.type});
    facts.params[p.name] = p.value;
  }
  for (const AuxTensor& t : s.aux) {
    // A ragged batch's sequences run in calls of their own, each seeing its own rows of every
    // tensor whose first dimension is B (Spec::unragged).
    for (size_t d = 0; d < t.dims.size() && s.raggedQueries; ++d)
      if (t.dims[d] == "Tq" || (t.dims[d] == "B" && d > 0))
        throw SpecError("aux=\"" + printAux(s.aux) + "\": '" + t.name + "' has " + t.dims[d] +
                        " as dimension " + std::to_string(d) +
                        "; with ragged_q=true an aux tensor takes B only as its first dimension "
                        "and no Tq (each sequence has its own)");
    scope.aux.push_back({t.name, t.elementType, static_cast<int>(t.dims.size())});
    std::vector<expr::Affine>& shape = facts.auxShapes[t.name];
    for (const std::string& dim : t.dims)
      shape.push_back(affineDim(s, dim));
  }
  auto resolve = [&](SpecExpression& e, std::string_view key, expr::Role role) {
    if (!e.given())
      return;
    // Bounds the tree's size, so its depth, which every walk of it recurses through.
    constexpr size_t kMaxLength = 4096;
    if (e.text.size() > kMaxLength)
      throw SpecError(std::string(key) + " is " + std::to_string(e.text.size()) +
                      " characters long; an expression may have at most " +
                      std::to_string(kMaxLength));
    try {
      auto tree = std::make_shared<expr::Node>(expr::parseExpr(key, e.text, role, scope));
      expr::checkAuxIndices(key, e.text, *tree, facts);
      if (s.raggedQueries)
        checkBatchReads(key, e.text, *tree, s);
      e.text = expr::print(*tree);
      e.tree = std::move(tree);
    } catch (const expr::ExprError& error) {
      throw SpecError(error.what());
    }
  };
  resolve(s.scoreMod, "score_mod", expr::Role::Score);
  resolve(s.maskMod, "mask_mod", expr::Role::Mask);
  checkEveryNameRead(s);
}

} // namespace attnc
