#include "Backends/Backend.h"

#include <algorithm>

namespace attnc {

std::string Backend::explain(const Spec&, const CompileOptions&, const std::string&, bool) const {
  throw UsageError("the " + std::string(name()) + " backend has no stages to explain");
}

std::optional<std::string> Backend::unsupported(const Spec& spec, const Target& target) const {
  const std::vector<std::string> known = targets();
  if (std::find(known.begin(), known.end(), target.name) == known.end()) {
    std::string names;
    for (const std::string& t : known)
      names += (names.empty() ? "" : " ") + t;
    return "--target " + target.name + ": not a target of the " + std::string(name()) +
           " backend; known: " + names;
  }
  const Device device = target.device;
  for (const Coverage& row : coverage()) {
    if (row.device != device)
      continue;
    std::optional<std::string> gap = firstGap(row, spec);
    if (!gap)
      return std::nullopt;
    std::string reason = "the " + std::string(name()) + " backend does not support " + *gap +
                         " on " + std::string(deviceName(device)) + " targets";
    if (!row.gapReason.empty())
      reason += " (" + std::string(row.gapReason) + ")";
    return reason + "; it covers " + describeCoverage(row) + " there (attnc backends)";
  }
  return "the " + std::string(name()) + " backend builds no " +
         std::string(deviceName(device)) + " kernels";
}

bool Backend::defersToAnother(const Spec& spec, const Target& target) const {
  for (const Coverage& row : coverage())
    if (row.device == target.device && !firstGap(row, spec))
      return attnc::defersToAnother(row, spec);
  return false;
}

} // namespace attnc
