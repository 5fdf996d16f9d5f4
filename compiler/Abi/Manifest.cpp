#include "Abi/Manifest.h"

#include "Abi/Arguments.h"
#include "attnc/Hash.hpp"
#include "attnc/attnc.h"

namespace attnc {

Target hostTarget() {
#if defined(__x86_64__)
  return {"host", "x86_64", "cpu", {}, ""};
#elif defined(__aarch64__)
  return {"host", "aarch64", "cpu", {}, ""};
#else
#error "attnc supports x86-64 and AArch64 hosts"
#endif
}

nlohmann::json buildManifest(const Spec& spec, const std::string& backend,
                             const nlohmann::json& schedule, const Target& target,
                             uint64_t workspaceBytes, const nlohmann::json& extra) {
  nlohmann::json m = {
      {"abi_version", ATTNC_ABI_VERSION},
      {"attnc_version", ATTNC_VERSION},
      {"spec", spec.canonical()},
      {"spec_hash", spec.hash()},
      {"backend", backend},
      {"schedule", schedule},
      {"target",
       {{"name", target.name},
        {"arch", target.arch},
        {"device", target.device},
        {"cpu_features", target.cpuFeatures}}},
      {"arguments", argumentsToJson(kernelArguments(spec))},
      {"workspace_bytes", workspaceBytes},
  };
  if (!target.cudaArch.empty())
    m["target"]["cuda_arch"] = target.cudaArch;
  m.update(extra);
  stampContentHash(m);
  return m;
}

void stampContentHash(nlohmann::json& manifest) {
  manifest.erase("content_hash");
  manifest["content_hash"] = fnv1a64Hex(manifest.dump());
}

Spec manifestSpec(const nlohmann::json& manifest) {
  auto spec = manifest.find("spec");
  if (spec == manifest.end() || !spec->is_string())
    throw SpecError("the manifest has no spec string");
  return parseSpec(spec->get<std::string>());
}

} // namespace attnc
