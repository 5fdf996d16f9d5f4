// attnc: the attention-kernel compiler's driver.
//
// Exit codes: 0 ok; 1 the job failed (a failed verification, a link error, a bundle this host
// cannot run); 2 bad usage or a bad spec; 3 an internal error; 75 (kEnvironmentExitCode) the
// machine failed it (a full disk), nothing was left behind and a rerun may succeed.
#include "Commands.h"
#include "FatalErrors.h"
#include "Interrupts.h"
#include "Support/Errors.h"
#include "attnc/Runtime.hpp"

#include <fmt/core.h>
#include <map>

namespace {

int exitCodeFor(attnc_status status) {
  // Wrong tensors or names come from the user's inputs; the rest is the job failing.
  return status == ATTNC_ERROR_TENSOR_MISMATCH || status == ATTNC_ERROR_INVALID_ARGUMENT ? 2 : 1;
}

} // namespace

int main(int argc, char** argv) {
  attnc::tools::handleInterrupts();
  attnc::tools::handleLlvmFatalErrors();
  CLI::App app{"attnc: compiles attention specs into fused kernels, and runs and verifies them"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "attnc " ATTNC_VERSION);
  std::map<CLI::App*, attnc::tools::Action> actions;
  auto track = [&](attnc::tools::Action action) {
    actions[app.get_subcommands({}).back()] = std::move(action);
  };
  track(attnc::tools::addSpecCommand(app));
  track(attnc::tools::addPresetsCommand(app));
  track(attnc::tools::addCompileCommand(app));
  track(attnc::tools::addRunCommand(app));
  track(attnc::tools::addVerifyCommand(app));
  track(attnc::tools::addBenchCommand(app));
  track(attnc::tools::addExplainCommand(app));
  track(attnc::tools::addTuneCommand(app));
  track(attnc::tools::addVizCommand(app));
  track(attnc::tools::addBackendsCommand(app));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e); // prints help, or the error with a hint
    return code == 0 ? 0 : 2;
  }
  try {
    for (CLI::App* sub : app.get_subcommands())
      return actions.at(sub)();
    return 2;
  } catch (const attnc::UsageError& e) {
    fmt::print(stderr, "attnc: error: {}\n", e.what());
    return 2;
  } catch (const attnc::JobError& e) {
    fmt::print(stderr, "attnc: failed: {}\n", e.what());
    return 1;
  } catch (const attnc::EnvironmentError& e) {
    fmt::print(stderr, "attnc: the machine failed: {}\n", e.what());
    return attnc::kEnvironmentExitCode;
  } catch (const attnc::runtime::Error& e) {
    fmt::print(stderr, "attnc: {}: {}\n", attnc_status_name(e.status()), e.what());
    return exitCodeFor(e.status());
  } catch (const std::exception& e) {
    fmt::print(stderr, "attnc: internal error: {}\n", e.what());
    return 3;
  }
}
