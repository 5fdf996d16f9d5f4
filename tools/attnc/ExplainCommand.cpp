// attnc explain: the IR of the MLIR pipeline after each named stage.
#include "Commands.h"
#include "Driver/Driver.h"

#include <fmt/core.h>
#include <memory>

namespace attnc::tools {

Action addExplainCommand(CLI::App& app) {
  struct Options {
    std::string spec, target = "host", stage;
    std::vector<std::string> schedule;
    bool printAfterAll = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("explain", "Print the spec, then the MLIR backend's IR after "
                                                "each stage: attn, online, tiled, vector, llvm");
  cmd->add_option("spec", o->spec, "spec text 'key=value ...' or a .json file")->required();
  cmd->add_option("--stage", o->stage, "print this stage only");
  cmd->add_option("--target", o->target, "as for attnc compile --backend mlir")
      ->capture_default_str();
  cmd->add_option("--schedule", o->schedule, "schedule parameters NAME=VALUE (comma separated)")
      ->delimiter(',');
  cmd->add_flag("--mlir-print-ir-after-all", o->printAfterAll,
                "also print the IR after every pass to stderr (MLIR's IR printing)");
  return [o] {
    Spec spec = loadSpec(o->spec);
    CompileOptions options;
    options.backend = "mlir";
    options.target = parseTarget(o->target);
    options.schedule = parseScheduleOverrides(o->schedule);
    fmt::print("{}", explainStages(spec, options, o->stage, o->printAfterAll));
    return 0;
  };
}

} // namespace attnc::tools
