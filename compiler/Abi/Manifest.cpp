#include "Abi/Manifest.h"

#include "Abi/Arguments.h"
#include "attnc/Hash.hpp"
#include "attnc/attnc.h"

namespace attnc {

nlohmann::json buildManifest(const Spec& spec, const std::string& backend,
                             const nlohmann::json& schedule, const TargetNeeds& needs,
                             const nlohmann::json& extra) {
  nlohmann::json m = {
      {"abi_version", ATTNC_ABI_VERSION},
      {"attnc_version", ATTNC_VERSION},
      {"spec", spec.canonical()},
      {"spec_hash", spec.hash()},
      {"backend", backend},
      {"schedule", schedule},
      {"target",
       {{"name", needs.target.name},
        {"arch", architectureName(needs.target.architecture)},
        {"device", deviceName(needs.target.device)},
        {"cpu_features", needs.cpuFeatures}}},
      {"arguments", argumentsToJson(kernelArguments(spec))},
  };
  if (needs.target.isCuda())
    m["target"]["cuda_arch"] = needs.target.cudaArch();
  if (spec.backward)
    m["backward"] = {{"arguments", argumentsToJson(backwardArguments(spec))}};
  if (spec.kvAppend) {
    // What the runtime needs to write k_new and v_new into the cache (runtime/src/KvAppend.h).
    m["kv_append"] = {
        {"order", spec.kvCache == KvCache::Paged
                      ? (spec.pageLayout == PageLayout::Nhd ? "nhd" : "hnd")
                      : (spec.layout == Layout::Bshd ? "bshd" : "bhsd")},
        {"rows_order", spec.raggedQueries ? "packed" : spec.layout == Layout::Bshd ? "bshd" : "bhsd"},
        {"rope_dims", spec.rope ? spec.ropeDims : 0},
        {"rope_theta", spec.ropeTheta},
        {"rope_interleaved", spec.ropeStyle == RopeStyle::Interleaved}};
  }
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
