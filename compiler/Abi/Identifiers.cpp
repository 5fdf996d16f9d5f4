#include "Abi/Identifiers.h"

#include <algorithm>
#include <cctype>

namespace attnc {
namespace {

// C and C++ keywords (C23, C++20) and alternative tokens: none can name a class or a symbol.
constexpr std::string_view kKeywords[] = {
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break",
    "case", "catch", "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept",
    "const", "consteval", "constexpr", "constinit", "const_cast", "continue", "co_await",
    "co_return", "co_yield", "decltype", "default", "delete", "do", "double", "dynamic_cast",
    "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto",
    "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
    "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register",
    "reinterpret_cast", "requires", "restrict", "return", "short", "signed", "sizeof", "static",
    "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local",
    "throw", "true", "try", "typedef", "typeid", "typename", "typeof", "union", "unsigned",
    "using", "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq"};

} // namespace

std::optional<std::string> cIdentifierProblem(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0])) ||
      !std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
      }))
    return "it must be a C identifier (letters, digits, _; not starting with a digit)";
  if (std::find(std::begin(kKeywords), std::end(kKeywords), name) != std::end(kKeywords))
    return "it is a C or C++ keyword";
  if (name.starts_with("__") || (name[0] == '_' && name.size() > 1 && std::isupper(name[1])))
    return "names beginning with __ or _ and a capital are reserved to the implementation";
  return std::nullopt;
}

} // namespace attnc
