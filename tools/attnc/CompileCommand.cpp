// attnc compile: spec -> bundle.
#include "Backends/Backend.h"
#include "Commands.h"

#include <fmt/core.h>
#include <memory>

namespace attnc::tools {

Action addCompileCommand(CLI::App& app) {
  struct Options {
    std::string spec, backend = "reference", target = "host", out;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("compile", "Compile a spec into a kernel bundle");
  cmd->add_option("spec", o->spec, "spec text 'key=value ...' or a .json file")->required();
  cmd->add_option("--backend", o->backend, "reference | halide | mlir")->capture_default_str();
  cmd->add_option("--target", o->target, "host (more targets come with the code generators)")
      ->capture_default_str();
  cmd->add_option("-o,--out", o->out, "directory for the bundle and its manifest")->required();
  return [o] {
    Spec spec = loadSpec(o->spec);
    BundlePaths paths = compileBundle(spec, {o->backend, o->target, o->out});
    fmt::print("{}\n", paths.bundle.string());
    return 0;
  };
}

} // namespace attnc::tools
