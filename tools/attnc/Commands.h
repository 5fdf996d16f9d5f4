// The attnc subcommands. Each add* function registers one subcommand on the app and returns the
// action to run when it is chosen; actions throw, and main maps errors to exit codes.
#ifndef ATTNC_TOOLS_ATTNC_COMMANDS_H
#define ATTNC_TOOLS_ATTNC_COMMANDS_H

#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace attnc::tools {

using Action = std::function<int()>; // returns the exit code

Action addSpecCommand(CLI::App& app);
Action addPresetsCommand(CLI::App& app);
Action addCompileCommand(CLI::App& app);
Action addRunCommand(CLI::App& app);
Action addVerifyCommand(CLI::App& app);
Action addBenchCommand(CLI::App& app);
Action addExplainCommand(CLI::App& app);
Action addTuneCommand(CLI::App& app);
Action addVizCommand(CLI::App& app);
Action addBackendsCommand(CLI::App& app);

// --schedule NAME=VALUE items as a map; UsageError for a malformed item.
std::map<std::string, int64_t> parseScheduleOverrides(const std::vector<std::string>& items);

} // namespace attnc::tools

#endif // ATTNC_TOOLS_ATTNC_COMMANDS_H
