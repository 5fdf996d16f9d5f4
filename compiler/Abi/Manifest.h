// A bundle's manifest: everything needed to check a call without looking at the code.
//
//   {"abi_version": 1, "attnc_version": "0.1.0", "spec": "<canonical spec>",
//    "spec_hash": "...", "backend": "reference", "schedule": {...},
//    "target": {"name": "host", "arch": "x86_64", "device": "cpu", "cpu_features": [...]},
//    (GPU bundles: "device": "cuda", "cuda_arch": "sm_90"; arch is the host code's),
//    (fat bundles, Backends/FatBundle.h: also "targets": [{...}, ...], best first),
//    "arguments": [{"name": "q", "role": "input", "dtypes": ["f32"], "shape": [...]}, ...],
//    "workspace_bytes": 0, "content_hash": "..."}
//
// content_hash covers every other field, so two bundles with the same hash are interchangeable.
#ifndef ATTNC_COMPILER_ABI_MANIFEST_H
#define ATTNC_COMPILER_ABI_MANIFEST_H

#include "Spec/Spec.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace attnc {

struct Target {
  std::string name;                     // as given: "host", "x86-64-avx512", ...
  std::string arch;                     // "x86_64", "aarch64"
  std::string device;                   // "cpu"
  std::vector<std::string> cpuFeatures; // /proc/cpuinfo flag names the code needs
  std::string cudaArch;                 // device "cuda": the oldest GPU it runs on, "sm_90"
};

// The machine this process runs on, needing no optional CPU feature.
Target hostTarget();

// `extra` holds backend-specific fields (e.g. "shared_runtime"), covered by the content hash.
nlohmann::json buildManifest(const Spec& spec, const std::string& backend,
                             const nlohmann::json& schedule, const Target& target,
                             uint64_t workspaceBytes,
                             const nlohmann::json& extra = nlohmann::json::object());

// Sets "content_hash" to the hash of everything else in the manifest: after any change to a
// built manifest (a shape-dispatch bundle merges its parts').
void stampContentHash(nlohmann::json& manifest);

// The spec a manifest was built from; throws SpecError if it no longer parses.
Spec manifestSpec(const nlohmann::json& manifest);

} // namespace attnc

#endif // ATTNC_COMPILER_ABI_MANIFEST_H
