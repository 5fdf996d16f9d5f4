// Names a user chooses that generated C and C++ code declares: a linked library's --name (its
// symbols and C++ class) and each aux tensor's (a kernel argument, so a member and a parameter
// of that class, Link/LinkedHeader.h).
#ifndef ATTNC_COMPILER_ABI_IDENTIFIERS_H
#define ATTNC_COMPILER_ABI_IDENTIFIERS_H

#include <optional>
#include <string>
#include <string_view>

namespace attnc {

// Why a C or C++ program cannot declare `name` (not an identifier, a C or C++ keyword, or a
// name reserved to the implementation), or nullopt when it can.
std::optional<std::string> cIdentifierProblem(std::string_view name);

} // namespace attnc

#endif // ATTNC_COMPILER_ABI_IDENTIFIERS_H
