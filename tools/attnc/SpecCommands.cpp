// attnc spec, attnc presets: the spec language from the command line.
#include "Commands.h"
#include "Spec/Presets.h"
#include "Spec/Spec.h"
#include "Spec/SpecKeys.h"

#include <fmt/core.h>
#include <memory>
#include <nlohmann/json.hpp>

namespace attnc::tools {

Action addSpecCommand(CLI::App& app) {
  struct Options {
    std::string spec;
    bool json = false, hash = false, keys = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "spec", "Validate a spec and print its canonical form (sorted keys, defaults filled)");
  cmd->add_option("spec", o->spec, "spec text 'key=value ...' or a .json file");
  cmd->add_flag("--json", o->json, "print the canonical form as JSON");
  cmd->add_flag("--hash", o->hash, "print the spec's stable hash");
  cmd->add_flag("--keys", o->keys, "list every key: allowed values and when it applies");
  return [o] {
    if (o->keys) {
      for (const SpecKey& key : specKeys())
        fmt::print("{:<14} {}\n{:<14}   allowed: {}; applies: {}\n", key.name, key.help, "",
                   key.allowed, key.appliesWhen);
      return 0;
    }
    if (o->spec.empty())
      throw UsageError("spec: give a spec ('variant=sdpa heads=8 d_k=64') or a .json file");
    Spec spec = loadSpec(o->spec);
    if (o->json)
      fmt::print("{}\n", spec.toJson().dump(2));
    else if (o->hash)
      fmt::print("{}\n", spec.hash());
    else
      fmt::print("{}\n", spec.canonical());
    return 0;
  };
}

Action addPresetsCommand(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "presets", "List the real models' attentions known by name (use as preset=NAME)");
  (void)cmd;
  return [] {
    for (const Preset& p : presets())
      fmt::print("{:<18} {}\n{:<18}   {}\n", p.name, p.spec, "", p.source);
    return 0;
  };
}

} // namespace attnc::tools
