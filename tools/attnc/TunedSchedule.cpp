#include "TunedSchedule.h"

#include "Backends/Backend.h"
#include "Tuner.h"
#include "Tuning/TuningDatabase.h"

#include <fmt/core.h>

namespace attnc::tools {
namespace {

using tuning::TrialRecord;

// The trials both databases hold for the spec, target and machine (the user's after the
// system's); a database that cannot be read is reported and left out.
std::vector<TrialRecord> recordsFor(const Spec& spec, const std::string& target,
                                    const std::string& hardware) {
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  std::vector<TrialRecord> records;
  for (const std::filesystem::path& path :
       {tuning::systemDatabasePath(self), tuning::userDatabasePath()}) {
    if (path.empty() || !std::filesystem::exists(path))
      continue;
    try {
      tuning::TuningDatabase db(path, tuning::TuningDatabase::Mode::ReadOnly);
      for (TrialRecord& r : db.trialsFor(spec.hash(), target, hardware))
        records.push_back(std::move(r));
    } catch (const tuning::DatabaseError& e) {
      fmt::print(stderr, "attnc: warning: {}; compiling without its records\n", e.what());
    }
  }
  return records;
}

} // namespace

std::optional<TunedSchedule> findTunedSchedule(const Spec& spec, const std::string& target,
                                               const std::string& backend,
                                               std::optional<std::pair<int64_t, int64_t>> shape) {
  std::string hardware;
  try {
    hardware = hardwareFor(target);
  } catch (const JobError&) {
    return std::nullopt; // no GPU here to match GPU records against
  }
  std::vector<TrialRecord> records = recordsFor(spec, target, hardware);
  if (records.empty())
    return std::nullopt;
  std::map<std::string, TuningSpace> spaces;
  try {
    for (TuningSpace& s : tuningSpaces(spec, target))
      spaces.emplace(s.backend, std::move(s));
  } catch (const UsageError&) {
    return std::nullopt; // a target some backend does not know: compile says so
  }

  auto applies = [&](const TrialRecord& r) {
    if (r.status != tuning::TrialStatus::Ok || r.key.attncVersion != ATTNC_VERSION ||
        (!backend.empty() && r.backend != backend) || !spaces.count(r.backend) ||
        spaces.at(r.backend).toolchain != r.toolchain)
      return false;
    try {
      spaces.at(r.backend).check(
          ScheduleParams(r.backend, r.params.get<std::map<std::string, int64_t>>(), "tuned"));
      return true;
    } catch (const std::exception&) {
      return false; // a parameter this attnc no longer has, or a combination it refuses
    }
  };
  std::vector<TrialRecord> usable;
  for (TrialRecord& r : records)
    if (applies(r))
      usable.push_back(std::move(r));
  // The bucket: the asked shape's, else the longest sequences tuned.
  std::optional<tuning::ShapeBucket> bucket;
  for (const TrialRecord& r : usable) {
    const tuning::ShapeBucket& b = r.key.bucket;
    if (shape ? b.contains(shape->first, shape->second)
              : !bucket || b.seqQLo * b.seqKLo > bucket->seqQLo * bucket->seqKLo)
      bucket = b;
  }
  const TrialRecord* best = nullptr;
  for (const TrialRecord& r : usable)
    if (bucket && r.key.bucket == *bucket && (!best || r.medianMs < best->medianMs))
      best = &r;
  if (!best)
    return std::nullopt;
  return TunedSchedule{
      best->backend, best->params.get<std::map<std::string, int64_t>>(),
      fmt::format("tuned: trial {} of {} ({:.3f} ms median at B={} Tq={} Tk={}, {} threads, on "
                  "{}, {})",
                  best->uid, best->key.bucket.text(), best->medianMs, best->batch, best->seqQ,
                  best->seqK, best->threads, best->key.hardware, best->createdAt)};
}

} // namespace attnc::tools
