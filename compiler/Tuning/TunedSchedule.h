// compile's use of the tuning database: the best verified trials for a spec, a target and this
// machine, from the user's database overlaid on the system one.
#ifndef ATTNC_COMPILER_TUNING_TUNEDSCHEDULE_H
#define ATTNC_COMPILER_TUNING_TUNEDSCHEDULE_H

#include "Driver/Driver.h"
#include "Spec/Spec.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attnc::tuning {

// Per shape bucket, the fastest "ok" trial of `backend` (any backend when empty) whose
// toolchain is this attnc's and whose values its backend still accepts: every tuned bucket,
// longest first, or only the one holding `shape` (Tq, Tk) when given. Each schedule's
// provenance names its record: uid, shape, machine and time. Unreadable databases are reported
// on stderr and skipped; empty when nothing applies.
std::vector<ShapeSchedule> findTunedSchedules(const Spec& spec, const Target& target,
                                              const std::string& backend,
                                              std::optional<std::pair<int64_t, int64_t>> shape);

} // namespace attnc::tuning

#endif // ATTNC_COMPILER_TUNING_TUNEDSCHEDULE_H
