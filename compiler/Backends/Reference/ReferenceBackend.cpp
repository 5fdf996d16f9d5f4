#include "Backends/Reference/ReferenceBackend.h"

#include "Abi/Manifest.h"
#include "Link/Toolchain.h"
#include "attnc/attnc.h"

namespace attnc {
namespace {

class ReferenceBackend final : public Backend {
public:
  std::string_view name() const override { return "reference"; }
  std::string_view description() const override {
    return "the f64 reference behind the kernel ABI (exact, slow)";
  }
  std::vector<std::string> targets() const override { return {"host"}; }
  std::span<const Coverage> coverage() const override {
    static const Coverage rows[] = {fullCoverage(Device::Cpu)};
    return rows;
  }
  std::optional<TuningSpace> tuningSpace(const Spec&, const Target&) const override {
    return std::nullopt;
  }
  CompileResult compile(const Spec& spec, const CompileOptions& options) const override;
};

} // namespace

CompileResult ReferenceBackend::compile(const Spec& spec, const CompileOptions& options) const {
  for (Emit kind : options.emit)
    if (kind != Emit::So && kind != Emit::SealedBundle)
      throw UsageError("--emit " + std::string(emitName(kind)) +
                       ": the reference backend writes bundles only (so)");
  if (!options.schedule.empty())
    throw UsageError("--schedule: the reference backend has no schedule parameters");
  BundleRequest request;
  request.manifest = buildManifest(options.describedSpec(spec), "reference",
                                   nlohmann::json::object(), {parseTarget("host"), {}});
  request.linkInputs = {findArchive("libattnc_bundle_reference.a"), findArchive("libattnc_core.a")};
  request.stem = bundleStem(options.describedSpec(spec), "reference");
  request.abiVersion = ATTNC_ABI_VERSION;
  OutputStaging staging(options.outDir);
  const std::vector<std::filesystem::path> written =
      staging.commit(writeKernel(request, staging, options.emit));
  return {written.front(), written};
}

const Backend& referenceBackend() {
  static const ReferenceBackend backend;
  return backend;
}

} // namespace attnc
