// Writes a bundle: the backend's link inputs plus the manifest, linked into one shared object.
//
// The manifest and the ABI version become data symbols (attnc_kernel_manifest,
// attnc_kernel_abi) of a small generated assembly file; the backend's archives or objects
// provide attnc_kernel_run. A version script exports those three symbols and nothing else, so
// bundles never clash with each other or with the application — except the symbols a backend
// asks to share (the Halide runtime's), which the runtime lets the first such bundle provide
// to every later one.
#ifndef ATTNC_COMPILER_LINK_BUNDLEWRITER_H
#define ATTNC_COMPILER_LINK_BUNDLEWRITER_H

#include "Link/Emit.h"
#include "Spec/Spec.h"
#include "Support/TemporaryPaths.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace attnc {

// <variant>_<spec hash>_<backend>: stable across runs, distinct across specs and backends.
std::string bundleStem(const Spec& spec, std::string_view backend);

// Files are made in a private directory inside the output directory and moved in only by
// commit(): on failure nothing is left behind (the output directory too, if it was created
// here), nor when a signal or LLVM ends the process (attnc removes them: TemporaryPaths.h),
// and a scratch directory that a killed compile left is removed by the next compile into the
// same directory. Throws UsageError, with the system's reason, when the directories cannot be
// made (EnvironmentError when the disk is full: Support/Files.h).
class OutputStaging {
public:
  explicit OutputStaging(std::filesystem::path outDir);
  ~OutputStaging();
  OutputStaging(const OutputStaging&) = delete;
  OutputStaging& operator=(const OutputStaging&) = delete;

  const std::filesystem::path& scratch() const { return scratch_; }
  const std::filesystem::path& outDir() const { return outDir_; }
  // Moves scratch()/name into the output directory for each name; returns the final paths.
  std::vector<std::filesystem::path> commit(const std::vector<std::string>& names);

private:
  std::filesystem::path outDir_, scratch_;
  bool createdOutDir_ = false, committed_ = false;
  int lockFd_ = -1; // flock'd while this compile lives (a later one removes dead scratch)
  // Removed by an interrupt (Support/TemporaryPaths.h) as by the destructor.
  std::optional<TemporaryPath> scratchRegistration_, outDirRegistration_;
};

struct BundleRequest {
  nlohmann::json manifest;
  std::vector<std::filesystem::path> linkInputs; // objects and archives, in link order
  std::string stem;                              // file name without extension
  uint32_t abiVersion;                           // normally ATTNC_ABI_VERSION
  std::vector<std::string> sharedExports;        // more version-script patterns: "halide_*"
  // How a shape-dispatch bundle calls this kernel (KernelRunner.h): the entry library's
  // runner and the generated functions it takes, defined in kernelObject (one of linkInputs).
  // Empty runner: the backend's bundles cannot be parts of one.
  std::string runner;
  std::vector<std::string> kernelSymbols;
  std::filesystem::path kernelObject;
};

struct BundlePaths {
  std::filesystem::path bundle;   // <outDir>/<stem>.so
  std::filesystem::path manifest; // <outDir>/<stem>.json, a copy for people and tools
};

// Links <stem>.so and writes <stem>.json into the staging directory (not yet committed);
// returns those two names. Throws JobError with the linker's output.
std::vector<std::string> linkBundle(const BundleRequest& request, const OutputStaging& staging);

// Instead of linking, writes what a shape-dispatch bundle (Backends/ShapeDispatch.cpp) needs to
// link this kernel beside others: <stem>.part.json (the manifest, runner, kernel symbols, the
// archives by path and the objects by file name) and copies of the request's objects. Returns
// the names written. Throws UsageError when the backend has no runner for this target.
std::vector<std::string> writeBundlePart(const BundleRequest& request,
                                         const OutputStaging& staging);

// Instead of a shared object, links the kernel into one relocatable object, <stem>.sealed.o,
// where only `keep` stays global (attnc_kernel_run unless told): the backend's runtime, helpers
// and C++ inline functions (their COMDAT groups dissolved) all become local, so several sealed
// kernels — of one backend, with one runtime's names — link side by side without clashing.
// Fat bundles and linked libraries (FatBundle.h) are made of them. Also writes <stem>.json;
// returns the two names. Throws JobError with the linker's or objcopy's output.
std::vector<std::string> sealBundle(const BundleRequest& request, const OutputStaging& staging,
                                    const std::string& keep = "attnc_kernel_run");

// What a backend writes for the kernel `emit` asks for: a part (writeBundlePart), a sealed
// kernel (sealBundle), else a linked bundle (linkBundle).
std::vector<std::string> writeKernel(const BundleRequest& request, const OutputStaging& staging,
                                     const EmitSet& emit);

// linkBundle, then commit both files.
BundlePaths writeBundle(const BundleRequest& request, const std::filesystem::path& outDir);

} // namespace attnc

#endif // ATTNC_COMPILER_LINK_BUNDLEWRITER_H
