// A bundle's manifest: everything needed to check a call without looking at the code.
//
//   {"abi_version": 2, "attnc_version": "0.1.0", "spec": "<canonical spec>",
//    "spec_hash": "...", "backend": "reference", "schedule": {...},
//    "target": {"name": "host", "arch": "x86_64", "device": "cpu", "cpu_features": [...]},
//    (GPU bundles: "device": "cuda", "cuda_arch": "sm_90"; arch is the host code's),
//    (fat bundles, Backends/FatBundle.h: also "targets": [{...}, ...], best first),
//    "arguments": [{"name": "q", "role": "input", "dtypes": ["f32"], "shape": [...]}, ...],
//    (with backward=true: "backward": {"arguments": [...]}, the backward entry's),
//    "content_hash": "..."}
//
// content_hash covers every other field, so two bundles with the same hash are interchangeable.
#ifndef ATTNC_COMPILER_ABI_MANIFEST_H
#define ATTNC_COMPILER_ABI_MANIFEST_H

#include "Abi/Target.h"
#include "Spec/Spec.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace attnc {

// What a manifest says of the target a kernel was built for: its name, architecture and
// device (with a CUDA target's compute capability, the oldest GPU it runs on), and the
// /proc/cpuinfo flags its code needs.
struct TargetNeeds {
  Target target;
  std::vector<std::string> cpuFeatures;
};

// `extra` holds backend-specific fields (e.g. "shared_runtime"), covered by the content hash.
nlohmann::json buildManifest(const Spec& spec, const std::string& backend,
                             const nlohmann::json& schedule, const TargetNeeds& target,
                             const nlohmann::json& extra = nlohmann::json::object());

// Sets "content_hash" to the hash of everything else in the manifest: after any change to a
// built manifest (a shape-dispatch bundle merges its parts').
void stampContentHash(nlohmann::json& manifest);

// The spec a manifest was built from; throws SpecError if it no longer parses.
Spec manifestSpec(const nlohmann::json& manifest);

} // namespace attnc

#endif // ATTNC_COMPILER_ABI_MANIFEST_H
