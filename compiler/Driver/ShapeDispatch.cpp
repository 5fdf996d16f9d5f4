#include "Driver/ShapeDispatch.h"

#include "Abi/Manifest.h"
#include "Driver/Driver.h"
#include "Link/Toolchain.h"
#include "Support/Errors.h"
#include "Support/Files.h"
#include "attnc/attnc.h"
#include "bundle/KernelRunner.h"

#include <algorithm>
#include <fstream>
#include <limits>

namespace attnc {
namespace {

namespace fs = std::filesystem;

nlohmann::json readJson(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// The kernel object of part `index` with its generated functions renamed <name>_shape<index>
// and every other symbol it defines made local, so parts never clash (their helpers and
// constants have the same names). objcopy is binutils', beside the linker.
std::vector<std::string> renameKernels(const fs::path& object, const fs::path& out,
                                       const std::vector<std::string>& kernels, size_t index) {
  std::vector<std::string> localize = {"objcopy"}, rename = {"objcopy"}, renamed;
  for (const std::string& k : kernels) {
    localize.push_back("--keep-global-symbol=" + k);
    renamed.push_back(k + "_shape" + std::to_string(index));
    rename.push_back("--redefine-sym=" + k + "=" + renamed.back());
  }
  localize.insert(localize.end(), {object.string(), out.string()});
  rename.push_back(out.string());
  const std::string hint = "objcopy comes with binutils, beside the linker";
  runTool(localize, "making the kernel's helpers local", hint);
  runTool(rename, "renaming the kernel's functions", hint);
  return renamed;
}

// The table ShapeDispatchKernel.cpp reads: hidden data, so each bundle has its own.
std::string tableAssembly(const std::vector<ShapeSchedule>& shapes,
                          const std::vector<std::string>& runners,
                          const std::vector<std::vector<std::string>>& kernels) {
  std::string s = "  .section .data.rel.ro,\"aw\"\n  .p2align 3\n"
                  "  .globl attnc_shape_count\n  .hidden attnc_shape_count\n"
                  "attnc_shape_count:\n  .quad " +
                  std::to_string(shapes.size()) +
                  "\n  .globl attnc_shape_entries\n  .hidden attnc_shape_entries\n"
                  "attnc_shape_entries:\n";
  for (size_t i = 0; i < shapes.size(); ++i) {
    const ShapeSchedule& b = shapes[i];
    s += "  .quad " + std::to_string(b.seqQLo) + ", " + std::to_string(b.seqQHi) + ", " +
         std::to_string(b.seqKLo) + ", " + std::to_string(b.seqKHi) + ", " +
         std::to_string(b.onlyInside ? 1 : 0) + "\n  .quad " + runners[i] + "\n";
    for (size_t k = 0; k < ATTNC_KERNEL_SYMBOLS; ++k)
      s += "  .quad " + (k < kernels[i].size() ? kernels[i][k] : std::string("0")) + "\n";
  }
  return s + "  .section .note.GNU-stack,\"\",%progbits\n";
}

} // namespace

std::optional<std::string> useTunedSchedules(KernelRequest& kernel, const EmitSet& emit,
                                             std::vector<ShapeSchedule> tuned) {
  if (tuned.empty())
    return std::nullopt;
  EmitSet kernelKinds = emit;
  kernelKinds.erase(Emit::Lib);
  const bool dispatch = (kernelKinds.empty() || kernelKinds == EmitSet{Emit::So}) &&
                        !kernel.target.isCuda();
  if (tuned.size() > 1 && dispatch) {
    kernel.shapeSchedules = std::move(tuned);
    return std::nullopt;
  }
  kernel.backend = tuned.front().backend;
  kernel.schedule = tuned.front().schedule;
  kernel.scheduleProvenance = tuned.front().provenance;
  if (tuned.size() == 1)
    return std::nullopt;
  return std::to_string(tuned.size()) + " shape buckets are tuned for " + kernel.target.name +
         "; these artifacts hold one kernel, so the longest bucket's schedule is used "
         "(--tuned-for TQ[,TK] picks one)";
}

std::vector<ShapeSchedule> decodingSchedules(const Spec& spec, const KernelRequest& kernel,
                                             const EmitSet& emit) {
  if (!kernel.withDecode || kernel.target.isCuda() ||
      (emit != EmitSet{Emit::So} && emit != EmitSet{Emit::SealedBundle}))
    return {};
  // The request's backend decodes too, when it can: auto's choice covers the spec best.
  const Backend& decoder = kernel.backend == "auto" ? fastestBackendFor(spec, kernel.target)
                                                    : backendNamed(kernel.backend);
  const std::optional<std::map<std::string, int64_t>> decodeSchedule =
      decoder.decodeSchedule(spec, kernel.target);
  if (!decodeSchedule)
    return {};
  constexpr int64_t kLongest = std::numeric_limits<int64_t>::max();
  std::vector<ShapeSchedule> shapes;
  for (ShapeSchedule s : kernel.shapeSchedules)
    if (s.seqQHi > kDecodeRows) {
      s.seqQLo = std::max(s.seqQLo, kDecodeRows + 1);
      shapes.push_back(s);
    }
  if (shapes.empty()) {
    // The request's own schedule, unless its shape schedules were all for short queries.
    const bool own = kernel.shapeSchedules.empty();
    shapes.push_back({kDecodeRows + 1, kLongest, 1, kLongest, std::string(decoder.name()),
                      own ? kernel.schedule : std::map<std::string, int64_t>{},
                      own ? kernel.scheduleProvenance : std::string()});
  }
  shapes.push_back({1, kDecodeRows, 1, kLongest, std::string(decoder.name()), *decodeSchedule,
                    "the decode kernel, for Tq <= " + std::to_string(kDecodeRows),
                    /*onlyInside=*/true});
  return shapes;
}

CompileResult compileShapeDispatch(const Spec& spec, const KernelRequest& kernel,
                                   const EmitSet& emit, const fs::path& outDir) {
  if (emit != EmitSet{Emit::So} && emit != EmitSet{Emit::SealedBundle})
    throw UsageError("the tuned schedules of several shape buckets go into one bundle (--emit "
                     "so); for other artifacts pick one bucket with --tuned-for TQ[,TK]");
  if (kernel.target.isCuda())
    throw UsageError("shape-dispatch bundles hold CPU kernels; for --target " +
                     kernel.target.name + " pick one tuned bucket with --tuned-for TQ[,TK]");
  // Longest first: the dispatch entry gives ties to the earlier entry.
  std::vector<ShapeSchedule> shapes = kernel.shapeSchedules;
  std::stable_sort(shapes.begin(), shapes.end(), [](const auto& a, const auto& b) {
    return a.seqQLo * a.seqKLo > b.seqQLo * b.seqKLo;
  });

  OutputStaging staging(outDir);
  const fs::path& scratch = staging.scratch();
  nlohmann::json manifest, buckets = nlohmann::json::array();
  std::set<std::string> backendNames, sharedExports, objectNames, cpuFeatures;
  std::vector<fs::path> objects, archives{findArchive("libattnc_bundle_dispatch.a")};
  std::vector<std::string> runners;
  std::vector<std::vector<std::string>> kernels;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const ShapeSchedule& shape = shapes[i];
    const KernelRequest part{shape.backend,   kernel.target, shape.schedule,
                             shape.provenance, {},            /*withDecode=*/false};
    const CompileResult compiled = compileKernel(spec, part, {Emit::BundlePart},
                                                 scratch / ("part" + std::to_string(i)));
    const fs::path partJson =
        *std::find_if(compiled.files.begin(), compiled.files.end(),
                      [](const fs::path& f) { return f.string().ends_with(".part.json"); });
    const nlohmann::json p = readJson(partJson);
    const nlohmann::json& m = p.at("manifest");
    if (i == 0)
      manifest = m;
    else if (m.at("arguments") != manifest.at("arguments") ||
             m.at("target").at("arch") != manifest.at("target").at("arch"))
      throw JobError("the " + shape.backend + " kernel for Tq " + std::to_string(shape.seqQLo) +
                     "+ takes other arguments or targets another architecture than the first; "
                     "compile its bucket on its own with --tuned-for");
    // The bundle needs every CPU feature any of its kernels uses (backends name different
    // ones for the same machine: the features their code generators enable).
    for (const nlohmann::json& feature : m.at("target").at("cpu_features"))
      cpuFeatures.insert(feature.get<std::string>());
    backendNames.insert(shape.backend);
    buckets.push_back({{"seq_q", {shape.seqQLo, shape.seqQHi}},
                       {"seq_k", {shape.seqKLo, shape.seqKHi}},
                       {"only_inside", shape.onlyInside},
                       {"backend", shape.backend},
                       {"schedule", m.at("schedule")}});
    if (m.contains("shared_runtime"))
      manifest["shared_runtime"] = m.at("shared_runtime");

    const fs::path dir = partJson.parent_path();
    const fs::path renamed = scratch / ("kernel_shape" + std::to_string(i) + ".o");
    kernels.push_back(renameKernels(dir / p.at("kernel_object").get<std::string>(), renamed,
                                    p.at("kernels").get<std::vector<std::string>>(), i));
    objects.push_back(renamed);
    runners.push_back(p.at("runner").get<std::string>());
    for (const nlohmann::json& o : p.at("objects"))
      if (objectNames.insert(o.at("name").get<std::string>()).second)
        objects.push_back(dir / o.at("file").get<std::string>());
    for (const std::string& a : p.at("archives").get<std::vector<std::string>>())
      if (std::find(archives.begin(), archives.end(), fs::path(a)) == archives.end())
        archives.push_back(a);
    for (const std::string& e : p.at("shared_exports").get<std::vector<std::string>>())
      sharedExports.insert(e);
  }

  std::string backend;
  for (const std::string& b : backendNames)
    backend += (backend.empty() ? "" : "+") + b;
  manifest["backend"] = backend;
  manifest["schedule"] = {{"shape_dispatch", buckets}};
  manifest["target"]["cpu_features"] = cpuFeatures;
  stampContentHash(manifest);

  const fs::path table = scratch / "shape_table.S";
  writeFile(table, tableAssembly(shapes, runners, kernels));
  BundleRequest request;
  request.manifest = manifest;
  request.linkInputs = objects;
  request.linkInputs.push_back(table);
  request.linkInputs.insert(request.linkInputs.end(), archives.begin(), archives.end());
  // Named after its backend when it has one (an MLIR bundle with its decode kernel is still
  // *_mlir.so), else after its shapes.
  request.stem = bundleStem(spec, backendNames.size() == 1 ? *backendNames.begin() : "shapes") +
                 (kernel.target.name == "host" ? "" : "_" + kernel.target.name);
  request.abiVersion = ATTNC_ABI_VERSION;
  request.sharedExports = {sharedExports.begin(), sharedExports.end()};
  const std::vector<fs::path> written = staging.commit(writeKernel(request, staging, emit));
  return {written.front(), written};
}

} // namespace attnc
