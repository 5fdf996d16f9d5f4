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
  // Covered by any row of the device; else the gap of the first row listing the most of the
  // spec's outputs (a backward spec's row).
  const Coverage* explained = nullptr;
  for (const Coverage& row : coverage()) {
    if (row.device != device)
      continue;
    if (!firstGap(row, spec))
      return std::nullopt;
    if (!explained || coveredOutputs(row, spec) > coveredOutputs(*explained, spec))
      explained = &row;
  }
  if (!explained)
    return "the " + std::string(name()) + " backend builds no " + std::string(deviceName(device)) +
           " kernels";
  const std::string gap = *firstGap(*explained, spec);
  std::string reason = "the " + std::string(name()) + " backend does not support " + gap + " on " +
                       std::string(deviceName(device)) + " targets";
  if (const std::string_view why = gapReason(*explained, gap); !why.empty())
    reason += " (" + std::string(why) + ")";
  return reason + "; it covers " + describeCoverage(*explained) + " there (attnc backends)";
}

bool Backend::defersToAnother(const Spec& spec, const Target& target) const {
  for (const Coverage& row : coverage())
    if (row.device == target.device && !firstGap(row, spec))
      return attnc::defersToAnother(row, spec);
  return false;
}

} // namespace attnc
