#include "Tuning/TunedSchedule.h"

#include "Driver/Driver.h"
#include "Tuning/Hardware.h"
#include "Tuning/Search.h"
#include "Tuning/Tuner.h"
#include "Tuning/TuningDatabase.h"

#include <algorithm>
#include <fmt/core.h>

namespace attnc::tuning {
namespace {

// The trials both databases hold for the spec, target and machine (the user's after the
// system's); a database that cannot be read is reported and left out.
std::vector<TrialRecord> recordsFor(const Spec& spec, const std::string& target,
                                    const std::string& hardware) {
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  std::vector<TrialRecord> records;
  for (const std::filesystem::path& path : {systemDatabasePath(self), userDatabasePath()}) {
    if (path.empty() || !std::filesystem::exists(path))
      continue;
    try {
      TuningDatabase db(path, TuningDatabase::Mode::ReadOnly);
      for (TrialRecord& r : db.trialsFor(trialsHash(spec), target, hardware))
        records.push_back(std::move(r));
    } catch (const DatabaseError& e) {
      fmt::print(stderr, "attnc: warning: {}; compiling without its records\n", e.what());
    }
  }
  return records;
}

} // namespace

std::vector<ShapeSchedule> findTunedSchedules(const Spec& spec, const Target& target,
                                              const std::string& backend,
                                              std::optional<std::pair<int64_t, int64_t>> shape) {
  std::string hardware;
  try {
    hardware = hardwareFor(target);
  } catch (const JobError&) {
    return {}; // no GPU here to match GPU records against
  }
  std::vector<TrialRecord> records = recordsFor(spec, target.name, hardware);
  if (records.empty())
    return {};
  std::map<std::string, TuningSpace> spaces;
  try {
    for (TuningSpace& s : tuningSpaces(spec, target))
      spaces.emplace(s.backend, std::move(s));
  } catch (const UsageError&) {
    return {}; // a spec some backend cannot schedule for this target: compile says so
  }

  auto applies = [&](const TrialRecord& r) {
    if (r.status != TrialStatus::Ok || r.key.attncVersion != ATTNC_VERSION ||
        (!backend.empty() && r.backend != backend) || !spaces.count(r.backend) ||
        spaces.at(r.backend).toolchain != r.toolchain)
      return false;
    try {
      // Parameters added since the trial (absent from its record) are at their defaults, as
      // compile fills them.
      std::map<std::string, int64_t> values =
          Candidate::defaultOf(spaces.at(r.backend)).values;
      for (const auto& [name, value] : r.params.get<std::map<std::string, int64_t>>())
        values[name] = value;
      spaces.at(r.backend).check(ScheduleParams(r.backend, values, "tuned"));
      return true;
    } catch (const std::exception&) {
      return false; // a parameter this attnc no longer has, or a combination it refuses
    }
  };
  // The fastest usable trial per bucket: the asked shape's bucket only, else every one.
  std::vector<const TrialRecord*> best;
  for (TrialRecord& r : records) {
    if (!applies(r) || (shape && !r.key.bucket.contains(shape->first, shape->second)))
      continue;
    auto same = std::find_if(best.begin(), best.end(),
                             [&](const TrialRecord* b) { return b->key.bucket == r.key.bucket; });
    if (same == best.end())
      best.push_back(&r);
    else if (r.medianMs < (*same)->medianMs)
      *same = &r;
  }
  std::sort(best.begin(), best.end(), [](const TrialRecord* a, const TrialRecord* b) {
    return a->key.bucket.seqQLo * a->key.bucket.seqKLo >
           b->key.bucket.seqQLo * b->key.bucket.seqKLo;
  });
  std::vector<ShapeSchedule> tuned;
  for (const TrialRecord* r : best)
    tuned.push_back(
        {r->key.bucket.seqQLo, r->key.bucket.seqQHi, r->key.bucket.seqKLo, r->key.bucket.seqKHi,
         r->backend, r->params.get<std::map<std::string, int64_t>>(),
         fmt::format("tuned: trial {} of {} ({:.3f} ms median at B={} Tq={} Tk={}, {} threads, "
                     "on {}, {})",
                     r->uid, r->key.bucket.text(), r->medianMs, r->batch, r->seqQ, r->seqK,
                     r->threads, r->key.hardware, r->createdAt)});
  return tuned;
}

} // namespace attnc::tuning
