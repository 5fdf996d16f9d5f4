// Writes a bundle: the backend's link inputs plus the manifest, linked into one shared object.
//
// The manifest and the ABI version become data symbols (attnc_kernel_manifest,
// attnc_kernel_abi) of a small generated assembly file; the backend's archives or objects
// provide attnc_kernel_run. A version script exports those three symbols and nothing else, so
// bundles never clash with each other or with the application.
#ifndef ATTNC_COMPILER_ARTIFACT_BUNDLEWRITER_H
#define ATTNC_COMPILER_ARTIFACT_BUNDLEWRITER_H

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace attnc {

struct BundleRequest {
  nlohmann::json manifest;
  std::vector<std::filesystem::path> linkInputs; // objects and archives, in link order
  std::string stem;                              // file name without extension
  uint32_t abiVersion;                           // normally ATTNC_ABI_VERSION
};

struct BundlePaths {
  std::filesystem::path bundle;   // <outDir>/<stem>.so
  std::filesystem::path manifest; // <outDir>/<stem>.json, a copy for people and tools
};

// Builds in a private directory inside outDir and moves the results in only when everything
// succeeded: on failure nothing is left behind (outDir too, if this call created it). Throws
// JobError with the linker's output.
BundlePaths writeBundle(const BundleRequest& request, const std::filesystem::path& outDir);

} // namespace attnc

#endif // ATTNC_COMPILER_ARTIFACT_BUNDLEWRITER_H
