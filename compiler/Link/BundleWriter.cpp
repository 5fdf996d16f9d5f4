#include "Link/BundleWriter.h"

#include "Link/Toolchain.h"
#include "Support/Errors.h"
#include "Support/Files.h"

#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <memory>
#include <sys/file.h>
#include <system_error>
#include <unistd.h>

namespace attnc {

std::string bundleStem(const Spec& spec, std::string_view backend) {
  return std::string(variantName(spec.variant)) + "_" + spec.hash().substr(0, 12) + "_" +
         std::string(backend);
}
namespace {

namespace fs = std::filesystem;

std::string quoted(const std::string& path) {
  std::string out = "\"";
  for (char c : path) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

// Data symbols for the ABI version and the NUL-terminated manifest. Protected: exported, but
// the bundle's own references bind to its own copies even when another bundle's are global.
std::string manifestAssembly(uint32_t abiVersion, const fs::path& manifestJson) {
  return "  .section .rodata\n"
         "  .globl attnc_kernel_abi\n"
         "  .protected attnc_kernel_abi\n"
         "  .type attnc_kernel_abi, %object\n"
         "  .p2align 2\n"
         "attnc_kernel_abi:\n"
         "  .long " +
         std::to_string(abiVersion) +
         "\n"
         "  .size attnc_kernel_abi, 4\n"
         "  .globl attnc_kernel_manifest\n"
         "  .protected attnc_kernel_manifest\n"
         "  .type attnc_kernel_manifest, %object\n"
         "attnc_kernel_manifest:\n"
         "  .incbin " +
         quoted(manifestJson.string()) +
         "\n"
         "  .byte 0\n"
         "  .size attnc_kernel_manifest, . - attnc_kernel_manifest\n"
         "  .section .note.GNU-stack,\"\",%progbits\n";
}

// The bundle's exports: the three kernel symbols, plus any the backend shares across bundles.
std::string exportsScript(const std::vector<std::string>& shared) {
  std::string script = "{\n  global: attnc_kernel_abi; attnc_kernel_manifest; attnc_kernel_run;";
  for (const std::string& pattern : shared)
    script += " " + pattern + ";";
  return script + "\n  local: *;\n};\n";
}

constexpr std::string_view kScratchPrefix = ".attnc-build-", kStartPrefix = ".attnc-start-";

// A compile holds an exclusive lock on its scratch directory's ".lock" while it lives; the
// kernel drops the lock when the process ends, however it ends. A scratch directory whose lock
// can be taken was left by a compile that is provably dead (killed by SIGKILL, say), and goes.
void removeDeadScratch(const fs::path& outDir) {
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(outDir, ec)) {
    if (!entry.path().filename().string().starts_with(kScratchPrefix))
      continue;
    const int fd = ::open((entry.path() / ".lock").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      continue; // no lock yet: its compile may be starting
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0)
      fs::remove_all(entry.path(), ec);
    ::close(fd);
  }
}

} // namespace

OutputStaging::OutputStaging(fs::path outDir) : outDir_(std::move(outDir)) {
  std::error_code ec;
  if (outDir_.empty())
    throw UsageError("-o: the output directory is an empty path");
  createdOutDir_ = !fs::exists(outDir_);
  if (createdOutDir_ && !fs::create_directories(outDir_, ec))
    throwSystemError<UsageError>("cannot create output directory " + outDir_.string(), ec.value());
  if (createdOutDir_)
    outDirRegistration_.emplace(outDir_);
  if (!fs::is_directory(outDir_))
    throw UsageError(outDir_.string() + " exists and is not a directory");
  removeDeadScratch(outDir_);
  // mkdtemp replaces the trailing XXXXXX with a unique suffix. The directory is locked under a
  // name removeDeadScratch ignores, and takes its scratch name only then: another compile can
  // never find it named but not yet locked.
  std::string startTemplate = (outDir_ / (std::string(kStartPrefix) + "XXXXXX")).string();
  if (!mkdtemp(startTemplate.data())) {
    const int error = errno;
    if (createdOutDir_)
      fs::remove_all(outDir_, ec);
    throwSystemError<UsageError>("cannot create a build directory in " + outDir_.string(), error);
  }
  scratch_ = fs::absolute(startTemplate);
  scratchRegistration_.emplace(scratch_);
  lockFd_ = ::open((scratch_ / ".lock").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (lockFd_ < 0 || ::flock(lockFd_, LOCK_EX) != 0)
    return; // unlocked: it keeps the starting name, which no later compile removes
  const fs::path named = scratch_.parent_path() /
                         (std::string(kScratchPrefix) +
                          scratch_.filename().string().substr(kStartPrefix.size()));
  fs::rename(scratch_, named, ec);
  if (!ec) {
    scratchRegistration_.reset();
    scratch_ = named;
    scratchRegistration_.emplace(scratch_);
  }
}

OutputStaging::~OutputStaging() {
  std::error_code ignored;
  fs::remove_all(scratch_, ignored);
  if (lockFd_ >= 0)
    ::close(lockFd_);
  if (!committed_ && createdOutDir_)
    fs::remove_all(outDir_, ignored);
}

std::vector<fs::path> OutputStaging::commit(const std::vector<std::string>& names) {
  std::vector<fs::path> moved;
  // Until every file is in place an interrupt removes those already moved, as a failure does.
  std::vector<std::unique_ptr<TemporaryPath>> movedRegistrations;
  for (const std::string& name : names) {
    std::error_code ec;
    fs::path target = outDir_ / name;
    fs::rename(scratch_ / name, target, ec);
    if (ec) {
      std::error_code ignored;
      for (const fs::path& done : moved)
        fs::remove(done, ignored);
      throwSystemError("cannot move " + name + " into " + outDir_.string(), ec.value());
    }
    moved.push_back(target);
    movedRegistrations.push_back(std::make_unique<TemporaryPath>(target));
  }
  committed_ = true;
  outDirRegistration_.reset(); // the output directory holds a finished bundle now
  return moved;
}

std::vector<std::string> linkBundle(const BundleRequest& request, const OutputStaging& staging) {
  const fs::path& scratch = staging.scratch();
  const fs::path manifestJson = scratch / (request.stem + ".json");
  const fs::path assembly = scratch / "manifest.S";
  const fs::path exports = scratch / "exports.map";
  const fs::path bundle = scratch / (request.stem + ".so");
  writeFile(manifestJson, request.manifest.dump(2) + "\n");
  writeFile(assembly, manifestAssembly(request.abiVersion, manifestJson));
  writeFile(exports, exportsScript(request.sharedExports));

  std::vector<std::string> argv = {linkerDriver(), "-shared", "-o", bundle.string(),
                                   assembly.string()};
  for (const fs::path& input : request.linkInputs)
    argv.push_back(input.string());
  for (const char* flag : {"-Wl,--undefined=attnc_kernel_run", "-Wl,-z,noexecstack", "-pthread"})
    argv.push_back(flag);
#if !ATTNC_SANITIZED_BUILD
  // Every symbol resolved at link time. A sanitizer build's archives call into the sanitizers'
  // runtime, which only the loading process (attnc or a test, instrumented alike) provides.
  argv.push_back("-Wl,-z,defs");
#endif
  argv.push_back("-Wl,--version-script=" + exports.string());
  runTool(argv, "linking the bundle", "set ATTNC_CXX to a C++ compiler driver");
  return {request.stem + ".so", request.stem + ".json"};
}

std::vector<std::string> writeBundlePart(const BundleRequest& request,
                                         const OutputStaging& staging) {
  if (request.runner.empty())
    throw UsageError("a bundle with several shape buckets holds CPU kernels of the halide and "
                     "mlir backends only; compile for one shape bucket (--tuned-for TQ[,TK])");
  const fs::path& scratch = staging.scratch();
  nlohmann::json part = {
      {"manifest", request.manifest},       {"runner", request.runner},
      {"kernels", request.kernelSymbols},   {"shared_exports", request.sharedExports},
      {"objects", nlohmann::json::array()}, {"archives", nlohmann::json::array()}};
  std::vector<std::string> names;
  for (const fs::path& input : request.linkInputs) {
    if (input.extension() == ".a") {
      part["archives"].push_back(input.string());
      continue;
    }
    // Objects made by the backend are copied beside the part; the dispatch bundle links each
    // name once (two Halide kernels share one Halide runtime object).
    const std::string copy = request.stem + "." + input.filename().string();
    copyFile(input, scratch / copy);
    names.push_back(copy);
    if (input == request.kernelObject)
      part["kernel_object"] = copy;
    else
      part["objects"].push_back({{"name", input.filename().string()}, {"file", copy}});
  }
  writeFile(scratch / (request.stem + ".part.json"), part.dump(2) + "\n");
  names.push_back(request.stem + ".part.json");
  return names;
}

std::vector<std::string> sealBundle(const BundleRequest& request, const OutputStaging& staging,
                                    const std::string& keep) {
  const fs::path& scratch = staging.scratch();
  const fs::path manifestJson = scratch / (request.stem + ".json");
  const fs::path assembly = scratch / "manifest.S";
  const fs::path linked = scratch / "sealed-global.o";
  const std::string sealed = request.stem + ".sealed.o";
  writeFile(manifestJson, request.manifest.dump(2) + "\n");
  writeFile(assembly, manifestAssembly(request.abiVersion, manifestJson));
  // -r: one relocatable object from the inputs, pulling archive members the entry needs;
  // groups are dissolved so that making their symbols local cannot orphan a reference.
  std::vector<std::string> argv = {linkerDriver(), "-r", "-nostdlib", "-o", linked.string(),
                                   assembly.string()};
  for (const fs::path& input : request.linkInputs)
    argv.push_back(input.string());
  argv.push_back("-Wl,--undefined=" + keep);
  argv.push_back("-Wl,--force-group-allocation");
  runTool(argv, "linking the sealed kernel", "set ATTNC_CXX to a C++ compiler driver");
  runTool({"objcopy", "--keep-global-symbol=" + keep, linked.string(), (scratch / sealed).string()},
          "making the sealed kernel's symbols local",
          "objcopy comes with binutils, beside the linker");
  return {sealed, request.stem + ".json"};
}

std::vector<std::string> writeKernel(const BundleRequest& request, const OutputStaging& staging,
                                     const EmitSet& emit) {
  if (emit.count(Emit::BundlePart))
    return writeBundlePart(request, staging);
  if (emit.count(Emit::SealedBundle))
    return sealBundle(request, staging);
  return linkBundle(request, staging);
}

BundlePaths writeBundle(const BundleRequest& request, const fs::path& outDir) {
  OutputStaging staging(outDir);
  std::vector<fs::path> paths = staging.commit(linkBundle(request, staging));
  return {paths[0], paths[1]};
}

} // namespace attnc
