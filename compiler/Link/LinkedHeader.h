// The header of a linked library (`attnc compile --emit lib`, Backends/FatBundle.h): the C
// declaration of its attnc_kernel_exports, and a C++ class with a typed entry point — one
// DLTensor per manifest argument, in manifest order or by name — over the runtime's checks:
//
//   attnc::kernels::encoder_attention attention;    // opens the kernel, picks the target
//   attention(q, k, v, o);                          // or attention.run({.q = &q, ..., .o = &o})
#ifndef ATTNC_COMPILER_LINK_LINKEDHEADER_H
#define ATTNC_COMPILER_LINK_LINKEDHEADER_H

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace attnc {

// Why `name` cannot name a linked library (its symbols and C++ class): not an identifier a
// program may declare (Abi/Identifiers.h), or a member of the class. nullopt when it can.
std::optional<std::string> libraryNameProblem(std::string_view name);

// `name` passes libraryNameProblem; `manifest` is the library's (its spec, targets and arguments).
std::string linkedHeader(const std::string& name, const nlohmann::json& manifest);

} // namespace attnc

#endif // ATTNC_COMPILER_LINK_LINKEDHEADER_H
