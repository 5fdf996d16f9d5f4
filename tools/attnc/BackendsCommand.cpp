// attnc backends: the capability table of this attnc's backends (and of bench's unfused
// baseline), or, with --spec, which of them build a spec for a target and why the others do not.
#include "Commands.h"
#include "Driver/Driver.h"
#include "Spec/Spec.h"
#include "Support/Errors.h"
#include "UnfusedBaseline.h"

#include <fmt/core.h>
#include <memory>
#include <nlohmann/json.hpp>

namespace attnc::tools {
namespace {

nlohmann::json backendJson(const Backend& b, int rank) {
  nlohmann::json rows = nlohmann::json::array();
  for (const Coverage& row : b.coverage())
    rows.push_back(coverageJson(row));
  return {{"name", b.name()},
          {"description", b.description()},
          {"auto_rank", rank},
          {"targets", b.targets()},
          {"coverage", rows}};
}

nlohmann::json tableJson() {
  nlohmann::json backends = nlohmann::json::array();
  int rank = 1;
  for (const Backend* b : registeredBackends()) {
    // --backend auto never picks the reference: rank 0.
    backends.push_back(backendJson(*b, b->name() == "reference" ? 0 : rank++));
  }
  return {{"backends", backends},
          {"baselines",
           {{{"name", "unfused"},
             {"description", "attnc bench's OpenBLAS baseline: sgemm, softmax, sgemm (f32)"},
             {"coverage", {coverageJson(bench::UnfusedBaseline::coverage())}}}}}};
}

// One markdown row per backend and target family: README.md's coverage table is this output.
std::string tableMarkdown(const nlohmann::json& table) {
  std::string text = "| backend | target family | variants | masks | modifiers | outputs | dtypes "
                     "| decode (Tq <= 16) "
                     "| bf16 and f16 products |\n"
                     "|---|---|---|---|---|---|---|---|---|\n";
  // A list a full row has (every variant, mask, ...) reads "all", so a new one changes no row.
  const nlohmann::json full = coverageJson(fullCoverage(Device::Cpu));
  auto list = [&](const nlohmann::json& row, const char* axis) {
    const nlohmann::json& items = row.at(axis);
    if (items == full.at(axis))
      return std::string("all");
    std::string joined;
    for (const auto& item : items)
      joined += (joined.empty() ? "" : " ") + item.get<std::string>();
    return joined.empty() ? std::string("none") : joined;
  };
  auto rows = [&](const nlohmann::json& entry) {
    for (const auto& row : entry.at("coverage"))
      text += fmt::format(
          "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", entry.at("name").get<std::string>(),
          row.at("family").get<std::string>(), list(row, "variants"), list(row, "masks"),
          list(row, "modifiers"), list(row, "outputs"), list(row, "dtypes"),
          row.value("decode", std::string("-")), row.value("products", std::string("-")));
  };
  for (const auto& entry : table.at("backends"))
    rows(entry);
  for (const auto& entry : table.at("baselines"))
    rows(entry);
  return text;
}

// For one spec and target: each backend's verdict, and the one --backend auto takes without a
// tuning record.
nlohmann::json verdictsJson(const Spec& spec, const Target& target) {
  nlohmann::json verdicts = nlohmann::json::array();
  for (const Backend* b : registeredBackends()) {
    std::optional<std::string> reason = b->unsupported(spec, target);
    nlohmann::json v = {{"name", b->name()}, {"supported", !reason}};
    if (reason)
      v["reason"] = *reason;
    verdicts.push_back(v);
  }
  nlohmann::json result = {
      {"spec", spec.canonical()}, {"target", target.name}, {"backends", verdicts}};
  try {
    result["auto"] = fastestBackendFor(spec, target).name();
  } catch (const UsageError&) {
    result["auto"] = nullptr;
  }
  return result;
}

} // namespace

Action addBackendsCommand(CLI::App& app) {
  struct Options {
    std::string spec, target = "host";
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "backends", "What each backend builds: variant x mask x modifier x output x dtype per "
                  "target family (the capability table), or one spec's verdicts");
  cmd->add_option("--spec", o->spec,
                  "say which backends build this spec for --target, and why the others do not");
  cmd->add_option("--target", o->target, "with --spec: the target")->capture_default_str();
  cmd->add_flag("--json", o->json, "print JSON");
  return [o] {
    if (o->spec.empty()) {
      if (o->target != "host")
        throw UsageError("--target is for --spec; the table lists every target");
      const nlohmann::json table = tableJson();
      fmt::print("{}", o->json ? table.dump(2) + "\n" : tableMarkdown(table));
      return 0;
    }
    const nlohmann::json verdicts = verdictsJson(loadSpec(o->spec), parseTarget(o->target));
    if (o->json) {
      fmt::print("{}\n", verdicts.dump(2));
      return 0;
    }
    for (const auto& v : verdicts.at("backends"))
      fmt::print("{}: {}\n", v.at("name").get<std::string>(),
                 v.at("supported").get<bool>() ? std::string("builds it")
                                               : v.at("reason").get<std::string>());
    fmt::print("auto: {}\n", verdicts.at("auto").is_null()
                                 ? std::string("none (no fused backend builds it)")
                                 : verdicts.at("auto").get<std::string>());
    return 0;
  };
}

} // namespace attnc::tools
