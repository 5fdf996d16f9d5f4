#include "ScheduleParams.h"

#include "Support/Errors.h"

#include <algorithm>
#include <stdexcept>

namespace attnc {

ScheduleParams::ScheduleParams(std::string backend, std::map<std::string, int64_t> values,
                               std::string provenance)
    : backend_(std::move(backend)), values_(std::move(values)), provenance_(std::move(provenance)) {
}

int64_t ScheduleParams::get(std::string_view name) const {
  auto it = values_.find(std::string(name));
  if (it == values_.end())
    throw std::out_of_range("schedule of backend " + backend_ + " has no parameter '" +
                            std::string(name) + "'");
  return it->second;
}

nlohmann::json ScheduleParams::toJson() const {
  return {{"backend", backend_}, {"params", values_}, {"provenance", provenance_}};
}

namespace {

std::string choicesText(const ParamSpace& p) {
  std::string allowed;
  for (int64_t c : p.choices)
    allowed += (allowed.empty() ? "" : " ") + std::to_string(c);
  return allowed;
}

} // namespace

ScheduleParams ScheduleParams::overridden(const std::map<std::string, int64_t>& values,
                                          std::span<const ParamSpace> space,
                                          const std::string& provenance) const {
  ScheduleParams result = *this;
  for (const auto& [name, value] : values) {
    auto p = std::find_if(space.begin(), space.end(),
                          [&](const ParamSpace& s) { return s.name == name; });
    if (p == space.end()) {
      std::string names;
      for (const ParamSpace& s : space)
        names += (names.empty() ? "" : " ") + std::string(s.name);
      throw UsageError("schedule parameter '" + name + "' is not one of backend " + backend_ +
                       "'s: " + names);
    }
    if (std::find(p->choices.begin(), p->choices.end(), value) == p->choices.end())
      throw UsageError("schedule parameter " + name + "=" + std::to_string(value) +
                       " is not allowed; choose from: " + choicesText(*p));
    result.values_[name] = value;
  }
  if (!provenance.empty())
    result.provenance_ = provenance;
  else if (!values.empty())
    result.provenance_ = "given on the command line, over: " + provenance_;
  return result;
}

ScheduleParams ScheduleParams::fromJson(const nlohmann::json& json,
                                        std::span<const ParamSpace> space) {
  if (!json.is_object() || !json.contains("backend") || !json.contains("params"))
    throw UsageError("a schedule is an object with \"backend\" and \"params\"");
  std::map<std::string, int64_t> values;
  for (const ParamSpace& p : space) {
    const nlohmann::json& params = json["params"];
    if (!params.contains(p.name) || !params[p.name].is_number_integer())
      throw UsageError("schedule parameter '" + std::string(p.name) + "' is missing");
    int64_t v = params[p.name].get<int64_t>();
    if (std::find(p.choices.begin(), p.choices.end(), v) == p.choices.end())
      throw UsageError("schedule parameter " + std::string(p.name) + "=" + std::to_string(v) +
                       " is not allowed; choose from: " + choicesText(p));
    values[std::string(p.name)] = v;
  }
  return ScheduleParams(json["backend"].get<std::string>(), std::move(values),
                        json.value("provenance", std::string("given")));
}

} // namespace attnc
