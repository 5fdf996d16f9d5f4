// Specs and presets in process: the same parser and messages as `attnc spec` and
// `attnc presets` (a bad spec raises attnc.SpecError with the CLI's message).
#include "Bindings.h"
#include "Spec/Presets.h"
#include "Spec/Spec.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>
#include <nlohmann/json.hpp>
#include <tuple>
#include <vector>

namespace nb = nanobind;

namespace attnc::python {
namespace {

// (canonical form, hash, canonical JSON text): what attnc.Spec keeps of a parsed spec.
using ParsedSpec = std::tuple<std::string, std::string, std::string>;

ParsedSpec parsed(const Spec& spec) {
  return {spec.canonical(), spec.hash(), spec.toJson().dump()};
}

} // namespace

void bindSpecs(nb::module_& module) {
  module.def(
      "parse_spec", [](const std::string& textOrPath) { return parsed(loadSpec(textOrPath)); },
      nb::arg("text_or_path"), "A spec's text, or the path of a .json file, parsed and checked.");
  module.def(
      "parse_spec_json",
      [](const std::string& json) {
        return parsed(parseSpecJson(parseJsonObjectStrictly(json, "the spec")));
      },
      nb::arg("json"), "A spec given as JSON text (repeated keys refused).");
  module.def(
      "presets",
      [] {
        std::vector<std::tuple<std::string, std::string, std::string>> all;
        for (const Preset& preset : presets())
          all.emplace_back(preset.name, preset.spec, preset.source);
        return all;
      },
      "(name, spec, source) of every preset.");
}

} // namespace attnc::python
