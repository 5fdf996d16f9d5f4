#include "Driver/FatBundle.h"

#include "Abi/Manifest.h"
#include "Driver/Driver.h"
#include "Link/LinkedHeader.h"
#include "Link/Toolchain.h"
#include "Support/Errors.h"
#include "Support/Files.h"
#include "attnc/attnc.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <string_view>

namespace attnc {
namespace {

namespace fs = std::filesystem;

// One target's sealed kernel and its manifest.
struct Member {
  fs::path sealed;
  nlohmann::json manifest;
};

// GPUs first, then CPU levels by how many features they need: a level that needs more is
// newer, and faster where it runs.
int64_t rank(const nlohmann::json& target) {
  if (target.at("device") == deviceName(Device::Cuda))
    return 1 << 20;
  return static_cast<int64_t>(target.at("cpu_features").size());
}

fs::path fileEndingWith(const std::vector<fs::path>& files, const std::string& suffix) {
  for (const fs::path& f : files)
    if (f.string().ends_with(suffix))
      return f;
  throw JobError("the target's compile wrote no " + suffix + " file");
}

// The run functions' table, and for a linked library the exports the application opens
// (attnc_kernel_exports, whose fields this lays out: two 4-byte words, then three pointers).
std::string tableAssembly(size_t count, const std::string& exportsName) {
  std::string s = "  .section .data.rel.ro,\"aw\"\n  .p2align 3\n"
                  "  .globl attnc_target_count\n  .hidden attnc_target_count\n"
                  "attnc_target_count:\n  .quad " +
                  std::to_string(count) +
                  "\n  .globl attnc_kernel_target_runs\n  .protected attnc_kernel_target_runs\n"
                  "attnc_kernel_target_runs:\n";
  for (size_t i = 0; i < count; ++i)
    s += "  .quad attnc_target" + std::to_string(i) + "_run\n";
  if (!exportsName.empty())
    s += "  .globl " + exportsName + "\n  .type " + exportsName + ", %object\n" + exportsName +
         ":\n  .long " + std::to_string(ATTNC_ABI_VERSION) + ", " + std::to_string(count) +
         "\n  .quad attnc_kernel_manifest, attnc_kernel_run, attnc_kernel_target_runs\n"
         "  .size " +
         exportsName + ", 32\n";
  return s + "  .section .note.GNU-stack,\"\",%progbits\n";
}

// The manifest of the whole: the members' spec and arguments, their targets best first, and
// as "target" the last one, which the bundle's own attnc_kernel_run runs.
nlohmann::json fatManifest(const std::vector<Member>& members) {
  nlohmann::json manifest = members.front().manifest;
  nlohmann::json targets = nlohmann::json::array(), schedules = nlohmann::json::array();
  std::vector<std::string> backends;
  for (const Member& m : members) {
    targets.push_back(m.manifest.at("target"));
    schedules.push_back({{"target", m.manifest.at("target").at("name")},
                         {"backend", m.manifest.at("backend")},
                         {"schedule", m.manifest.at("schedule")}});
    const std::string backend = m.manifest.at("backend");
    if (std::find(backends.begin(), backends.end(), backend) == backends.end())
      backends.push_back(backend);
  }
  std::string backend;
  for (const std::string& b : backends)
    backend += (backend.empty() ? "" : "+") + b;
  manifest["backend"] = backend;
  manifest["schedule"] = {{"targets", schedules}};
  manifest["target"] = targets.back();
  manifest["targets"] = targets;
  // Each member keeps its runtime to itself, so the whole shares none.
  manifest.erase("shared_runtime");
  stampContentHash(manifest);
  return manifest;
}

// Moves every file of `files` (written under a member's directory) to the staging root.
std::vector<std::string> adopt(const std::vector<fs::path>& files, const fs::path& scratch) {
  std::vector<std::string> names;
  for (const fs::path& f : files) {
    fs::rename(f, scratch / f.filename());
    names.push_back(f.filename().string());
  }
  return names;
}

} // namespace

CompileResult compileFatBundle(const Spec& spec, const CompileRequest& compile) {
  EmitSet perTarget = compile.emit;
  const bool bundle = perTarget.erase(Emit::So) > 0, library = perTarget.erase(Emit::Lib) > 0;
  std::set<std::string> seen;
  for (const KernelRequest& k : compile.kernels)
    if (!seen.insert(k.target.name).second)
      throw UsageError("--target lists " + k.target.name + " twice; name each target once");
  const std::string name =
      compile.libraryName.empty()
          ? "attnc_" + std::string(variantName(spec.variant)) + "_" + spec.hash().substr(0, 12)
          : compile.libraryName;
  if (auto problem = library ? libraryNameProblem(name) : std::nullopt)
    throw UsageError("--name " + name +
                     ": the linked library's name becomes C symbols and a C++ class, and " +
                     *problem);

  OutputStaging staging(compile.outDir);
  const fs::path& scratch = staging.scratch();
  std::vector<Member> members;
  std::vector<std::string> files;
  for (size_t i = 0; i < compile.kernels.size(); ++i) {
    const KernelRequest& kernel = compile.kernels[i];
    const fs::path dir = scratch / ("target" + std::to_string(i));
    if (bundle || library) {
      const CompileResult sealed =
          compileKernel(spec, kernel, {Emit::SealedBundle}, dir / "kernel");
      members.push_back({fileEndingWith(sealed.files, ".sealed.o"), nlohmann::json()});
      std::ifstream manifest(fileEndingWith(sealed.files, ".json"));
      members.back().manifest = nlohmann::json::parse(manifest);
    }
    if (!perTarget.empty()) {
      const std::vector<std::string> written =
          adopt(compileKernel(spec, kernel, perTarget, dir / "files").files, scratch);
      files.insert(files.end(), written.begin(), written.end());
    }
  }
  if (members.empty())
    return {staging.outDir() / files.front(), staging.commit(files)};

  for (const Member& m : members) {
    const nlohmann::json& first = members.front().manifest;
    if (m.manifest.at("target").at("arch") != first.at("target").at("arch"))
      throw UsageError("the targets " + first.at("target").at("name").get<std::string>() +
                       " and " + m.manifest.at("target").at("name").get<std::string>() +
                       " are for different architectures; one bundle holds one architecture's "
                       "code (GPU targets count as the host's)");
    if (m.manifest.at("arguments") != first.at("arguments"))
      throw JobError("the kernel for " + m.manifest.at("target").at("name").get<std::string>() +
                     " takes other arguments than the one for " +
                     first.at("target").at("name").get<std::string>());
  }
  std::stable_sort(members.begin(), members.end(), [](const Member& a, const Member& b) {
    return rank(a.manifest.at("target")) > rank(b.manifest.at("target"));
  });

  std::vector<fs::path> linkInputs;
  for (size_t i = 0; i < members.size(); ++i) {
    const fs::path renamed = scratch / ("target" + std::to_string(i) + ".o");
    runTool({"objcopy",
             "--redefine-sym=attnc_kernel_run=attnc_target" + std::to_string(i) + "_run",
             members[i].sealed.string(), renamed.string()},
            "naming the target's kernel", "objcopy comes with binutils, beside the linker");
    linkInputs.push_back(renamed);
  }
  const fs::path fatEntry = findArchive("libattnc_bundle_fat.a");

  BundleRequest request;
  request.manifest = fatManifest(members);
  request.abiVersion = ATTNC_ABI_VERSION;
  auto withTable = [&](const std::string& exportsName) {
    const fs::path table = scratch / (exportsName.empty() ? "targets.S" : "exports.S");
    writeFile(table, tableAssembly(members.size(), exportsName));
    request.linkInputs = linkInputs;
    request.linkInputs.insert(request.linkInputs.end(), {table, fatEntry});
  };
  if (bundle) {
    withTable("");
    request.stem = bundleStem(spec, request.manifest.at("backend").get<std::string>()) + "_fat";
    request.sharedExports = {"attnc_kernel_target_runs"};
    const std::vector<std::string> written = linkBundle(request, staging);
    files.insert(files.begin(), written.begin(), written.end());
  }
  if (library) {
    withTable(name + "_kernel");
    request.stem = name;
    request.sharedExports.clear();
    const std::vector<std::string> sealed = sealBundle(request, staging, name + "_kernel");
    const std::string archive = "lib" + name + ".a", object = name + ".o";
    fs::rename(scratch / sealed.front(), scratch / object);
    runTool({"ar", "rcsD", (scratch / archive).string(), (scratch / object).string()},
            "archiving the linked kernel", "ar comes with binutils");
    writeFile(scratch / (name + ".h"), linkedHeader(name, request.manifest));
    const std::vector<std::string> written = {archive, name + ".h", sealed.back()};
    files.insert(bundle ? files.begin() + 2 : files.begin(), written.begin(), written.end());
  }
  const std::vector<fs::path> written = staging.commit(files);
  return {written.front(), written};
}

} // namespace attnc
