// Refusing a file that is not a whole ELF shared object before dlopen maps it: dlopen of a
// truncated file maps pages past its end, and the loader's first read of them is a SIGBUS.
#ifndef ATTNC_RUNTIME_ELFCHECK_H
#define ATTNC_RUNTIME_ELFCHECK_H

#include <optional>
#include <string>

namespace attnc::runtime {

// Why `path` is not a complete 64-bit ELF shared object (unreadable, not ELF, another class or
// type, or headers and loadable segments reaching past the end of the file), or empty when it is.
std::optional<std::string> sharedObjectProblem(const std::string& path);

} // namespace attnc::runtime

#endif // ATTNC_RUNTIME_ELFCHECK_H
