#include "Backends/Reference/ReferenceBackend.h"

#include "Artifact/Manifest.h"
#include "Artifact/Toolchain.h"
#include "attnc/attnc.h"

namespace attnc {

CompileResult compileReferenceBundle(const Spec& spec, const CompileOptions& options) {
  if (options.target != "host")
    throw UsageError("--target " + options.target +
                     ": the reference backend builds for the host only (--target host)");
  for (const std::string& kind : options.emit)
    if (kind != "so" && kind != "sealed")
      throw UsageError("--emit " + kind + ": the reference backend writes bundles only (so)");
  if (!options.schedule.empty())
    throw UsageError("--schedule: the reference backend has no schedule parameters");
  BundleRequest request;
  request.manifest = buildManifest(spec, "reference", nlohmann::json::object(), hostTarget(), 0);
  request.linkInputs = {findArchive("libattnc_bundle_reference.a"), findArchive("libattnc_core.a")};
  request.stem = bundleStem(spec, "reference");
  request.abiVersion = ATTNC_ABI_VERSION;
  OutputStaging staging(options.outDir);
  const std::vector<std::filesystem::path> written =
      staging.commit(writeKernel(request, staging, options.emit));
  return {written.front(), written};
}

} // namespace attnc
