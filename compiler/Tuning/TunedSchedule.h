// compile's use of the tuning database: the best verified trial for a spec, a target and this
// machine, from the user's database overlaid on the system one.
#ifndef ATTNC_TOOLS_ATTNC_TUNEDSCHEDULE_H
#define ATTNC_TOOLS_ATTNC_TUNEDSCHEDULE_H

#include "Spec/Spec.h"
#include "Tuning/TuningRecord.h"

#include <cstdint>
#include <map>
#include <optional>
#include <vector>
#include <string>

namespace attnc::tools {

struct TunedSchedule {
  tuning::ShapeBucket bucket;
  std::string backend;
  std::map<std::string, int64_t> values;
  std::string provenance; // the record: its uid, database, time, shape and machine
};

// Per shape bucket, the fastest "ok" trial of `backend` (any backend when empty) whose
// toolchain is this attnc's and whose values its backend still accepts: every tuned bucket,
// longest first, or only the one holding `shape` when given. Unreadable databases are reported
// on stderr and skipped; empty when nothing applies.
std::vector<TunedSchedule> findTunedSchedules(const Spec& spec, const std::string& target,
                                              const std::string& backend,
                                              std::optional<std::pair<int64_t, int64_t>> shape);

} // namespace attnc::tools

#endif // ATTNC_TOOLS_ATTNC_TUNEDSCHEDULE_H
