// Schedules as data: named integer parameters of one backend, with the space each may range
// over. The algorithm never names a tile size; a backend's schedule reads these values. The
// autotuner searches the spaces and the tuning database stores ScheduleParams as JSON.
#ifndef ATTNC_SCHEDULES_SCHEDULEPARAMS_H
#define ATTNC_SCHEDULES_SCHEDULEPARAMS_H

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace attnc {

// One tunable parameter: its name, the values it may take, and what it controls.
struct ParamSpace {
  std::string_view name;
  std::vector<int64_t> choices;
  std::string_view help;
};

class ScheduleParams {
public:
  ScheduleParams(std::string backend, std::map<std::string, int64_t> values,
                 std::string provenance);

  const std::string& backend() const { return backend_; }
  int64_t get(std::string_view name) const; // throws std::out_of_range naming the parameter
  // Where the values come from: the measurement and machine that justified them, or "tuned".
  const std::string& provenance() const { return provenance_; }

  // {"backend": ..., "params": {name: value}, "provenance": ...}
  nlohmann::json toJson() const;
  // Values outside `space` or missing from it throw UsageError naming the parameter.
  static ScheduleParams fromJson(const nlohmann::json& json, std::span<const ParamSpace> space);

  // These params with some values replaced; unknown names and values outside `space` throw
  // UsageError naming them and what is allowed. `provenance` says where the values come from
  // (a tuning record, say); by default, the command line.
  ScheduleParams overridden(const std::map<std::string, int64_t>& values,
                            std::span<const ParamSpace> space,
                            const std::string& provenance = "") const;

private:
  std::string backend_;
  std::map<std::string, int64_t> values_;
  std::string provenance_;
};

} // namespace attnc

#endif // ATTNC_SCHEDULES_SCHEDULEPARAMS_H
