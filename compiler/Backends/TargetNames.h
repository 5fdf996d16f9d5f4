// Looking up a backend's named targets ("host" is each backend's own business).
#ifndef ATTNC_COMPILER_BACKENDS_TARGETNAMES_H
#define ATTNC_COMPILER_BACKENDS_TARGETNAMES_H

#include "Support/Errors.h"

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace attnc {

// The entry of `table` (structs with a `name`) called `name`; UsageError listing "host" and
// every name in the table otherwise.
template <class Named>
const Named& findNamedTarget(std::span<const Named> table, const std::string& name,
                             std::string_view backend) {
  for (const Named& n : table)
    if (name == n.name)
      return n;
  std::string names = "host";
  for (const Named& n : table)
    names += std::string(" ") + n.name;
  throw UsageError("--target " + name + ": not a target of the " + std::string(backend) +
                   " backend; known: " + names);
}

// "host", then every name in `table`.
template <class Named>
std::vector<std::string> targetNames(std::span<const Named> table) {
  std::vector<std::string> names{"host"};
  for (const Named& n : table)
    names.emplace_back(n.name);
  return names;
}

} // namespace attnc

#endif // ATTNC_COMPILER_BACKENDS_TARGETNAMES_H
