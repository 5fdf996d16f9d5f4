#include "Artifact/BundleWriter.h"

#include "Artifact/Toolchain.h"
#include "Support/Errors.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <system_error>

namespace attnc {
namespace {

namespace fs = std::filesystem;

void writeFile(const fs::path& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
  if (!out.flush())
    throw JobError("cannot write " + path.string());
}

std::string readFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

std::string quoted(const std::string& path) {
  std::string out = "\"";
  for (char c : path) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

// Data symbols for the ABI version and the NUL-terminated manifest.
std::string manifestAssembly(uint32_t abiVersion, const fs::path& manifestJson) {
  return "  .section .rodata\n"
         "  .globl attnc_kernel_abi\n"
         "  .type attnc_kernel_abi, %object\n"
         "  .p2align 2\n"
         "attnc_kernel_abi:\n"
         "  .long " +
         std::to_string(abiVersion) +
         "\n"
         "  .size attnc_kernel_abi, 4\n"
         "  .globl attnc_kernel_manifest\n"
         "  .type attnc_kernel_manifest, %object\n"
         "attnc_kernel_manifest:\n"
         "  .incbin " +
         quoted(manifestJson.string()) +
         "\n"
         "  .byte 0\n"
         "  .size attnc_kernel_manifest, . - attnc_kernel_manifest\n"
         "  .section .note.GNU-stack,\"\",%progbits\n";
}

constexpr const char* kExports =
    "{\n  global: attnc_kernel_abi; attnc_kernel_manifest; attnc_kernel_run;\n  local: *;\n};\n";

// Removes the scratch directory (and the output directory if we made it) unless released.
class Cleanup {
public:
  Cleanup(fs::path scratch, fs::path createdOut)
      : scratch_(std::move(scratch)), createdOut_(std::move(createdOut)) {}
  ~Cleanup() {
    std::error_code ignored;
    fs::remove_all(scratch_, ignored);
    if (!released_ && !createdOut_.empty())
      fs::remove_all(createdOut_, ignored);
  }
  void release() { released_ = true; }

private:
  fs::path scratch_, createdOut_;
  bool released_ = false;
};

} // namespace

BundlePaths writeBundle(const BundleRequest& request, const fs::path& outDir) {
  std::error_code ec;
  bool created = !fs::exists(outDir);
  if (created && !fs::create_directories(outDir, ec))
    throw JobError("cannot create output directory " + outDir.string() + ": " + ec.message());
  if (!fs::is_directory(outDir))
    throw JobError(outDir.string() + " exists and is not a directory");
  std::string scratchTemplate = (outDir / ".attnc-build-XXXXXX").string();
  if (!mkdtemp(scratchTemplate.data())) {
    if (created)
      fs::remove_all(outDir, ec);
    throw JobError("cannot create a build directory in " + outDir.string());
  }
  const fs::path scratch = fs::absolute(scratchTemplate);
  Cleanup cleanup(scratch, created ? outDir : fs::path());

  const fs::path manifestJson = scratch / (request.stem + ".json");
  const fs::path assembly = scratch / "manifest.S";
  const fs::path exports = scratch / "exports.map";
  const fs::path bundle = scratch / (request.stem + ".so");
  const fs::path log = scratch / "link.log";
  writeFile(manifestJson, request.manifest.dump(2) + "\n");
  writeFile(assembly, manifestAssembly(request.abiVersion, manifestJson));
  writeFile(exports, kExports);

  std::vector<std::string> argv = {linkerDriver(), "-shared", "-o", bundle.string(),
                                   assembly.string()};
  for (const fs::path& input : request.linkInputs)
    argv.push_back(input.string());
  for (const char* flag :
       {"-Wl,--undefined=attnc_kernel_run", "-Wl,-z,defs", "-Wl,-z,noexecstack", "-pthread"})
    argv.push_back(flag);
  argv.push_back("-Wl,--version-script=" + exports.string());
  int status = runProcess(argv, log);
  if (status != 0)
    throw JobError("linking the bundle failed (" + argv[0] + " exited with " +
                   std::to_string(status) + "):\n" + readFile(log));

  BundlePaths paths{outDir / (request.stem + ".so"), outDir / (request.stem + ".json")};
  fs::rename(bundle, paths.bundle, ec);
  if (!ec)
    fs::rename(manifestJson, paths.manifest, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(paths.bundle, ignored);
    throw JobError("cannot move the bundle into " + outDir.string() + ": " + ec.message());
  }
  cleanup.release();
  return paths;
}

} // namespace attnc
