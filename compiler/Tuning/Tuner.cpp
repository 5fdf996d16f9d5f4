#include "Tuning/Tuner.h"

#include "Driver/Driver.h"
#include "Support/Errors.h"
#include "Tuning/BuildIdentity.h"
#include "Tuning/Hardware.h"
#include "attnc/Hash.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <thread>

namespace attnc::tuning {
namespace {

constexpr double kFailed = std::numeric_limits<double>::infinity(); // a failed trial's time

nlohmann::json msOrNull(double ms) {
  return std::isfinite(ms) ? nlohmann::json(ms) : nlohmann::json();
}

// One run of the search over `spaces`, in three steps: propose (each backend's default, then
// the Search's candidates), measure (the Measurement, or an earlier record of the candidate),
// record (the database, the observer and the best so far).
class TuningRun {
public:
  TuningRun(const Spec& spec, const TuneOptions& options, std::vector<TuningSpace> spaces,
            TuningDatabase& db, Measurement& measurement, TuneObserver& observer)
      : spec_(spec), options_(options), spaces_(std::move(spaces)), db_(db),
        measurement_(measurement), observer_(observer), start_(std::chrono::steady_clock::now()) {
    outcome_.key = tuningKey(spec, options);
    for (const TuningSpace& s : spaces_)
      toolchainOf_[s.backend] = s.toolchain;
    // Earlier trials of the same key and toolchain, by candidate: a resumed run reuses them.
    for (TrialRecord& r : db_.trials(outcome_.key))
      if (reusable(r))
        earlier_.insert_or_assign(r.candidate(), std::move(r));
  }

  TuneOutcome run() {
    observer_.event({{"event", "start"},
                     {"spec", outcome_.key.spec},
                     {"timed", spec_.backward ? "forward+backward" : "forward"},
                     {"target", options_.target.name},
                     {"hardware", outcome_.key.hardware},
                     {"bucket", outcome_.key.bucket.text()},
                     {"database", db_.path().string()},
                     {"trials", options_.trials},
                     {"earlier_trials", earlier_.size()},
                     {"seed", options_.seed},
                     {"strategy", options_.strategy == Strategy::Random ? "random" : "evolution"},
                     {"shard", options_.shard.text()}});
    const std::vector<TuningSpace> searched = measureDefaults();
    if (outcome_.stopped.empty() && !searched.empty())
      search(searched);
    if (outcome_.stopped.empty()) // no backend's default compiled: nothing to search
      outcome_.stopped = "trials";
    outcome_.trials = static_cast<int>(results_.size());
    if (outcome_.stopped == "interrupted")
      outcome_.interruptSignal = measurement_.stopSignal();

    nlohmann::json done = {{"event", "done"},
                           {"stopped", outcome_.stopped},
                           {"trials", outcome_.trials},
                           {"new_trials", outcome_.freshTrials},
                           {"database", db_.path().string()}};
    if (std::isfinite(outcome_.bestMs)) {
      done["best"] = outcome_.best;
      done["best_ms"] = outcome_.bestMs;
    }
    if (std::isfinite(outcome_.defaultMs)) {
      done["default"] = outcome_.defaultName;
      done["default_ms"] = outcome_.defaultMs;
      done["speedup_over_default"] = outcome_.defaultMs / outcome_.bestMs;
    }
    observer_.event(done);
    return outcome_;
  }

private:
  // Each backend's default first; a backend whose default does not compile for this spec (a
  // variant it lacks, say) leaves the search. Returns the spaces to search.
  std::vector<TuningSpace> measureDefaults() {
    std::vector<TuningSpace> searched;
    for (const TuningSpace& s : spaces_) {
      const Candidate c = Candidate::defaultOf(s);
      const std::optional<TrialRecord> record = trial(c);
      if (!record) {
        outcome_.stopped = "interrupted";
        return {};
      }
      if (results_[c.name()] < outcome_.defaultMs) {
        outcome_.defaultMs = results_[c.name()];
        outcome_.defaultName = c.name();
      }
      if (record->status == TrialStatus::Invalid || record->status == TrialStatus::CompileError)
        observer_.event(
            {{"event", "backend_left_out"},
             {"backend", s.backend},
             {"why", "its default schedule does not compile for this spec: " + record->detail}});
      else
        searched.push_back(s);
    }
    return searched;
  }

  // The search's proposals until the trial budget, the time budget or the candidates run out.
  void search(const std::vector<TuningSpace>& searched) {
    Search proposals(searched, options_.seed, options_.shard, std::max(4, options_.trials / 4),
                     options_.strategy);
    while (true) {
      if (static_cast<int>(results_.size()) >= options_.trials) {
        outcome_.stopped = "trials";
        return;
      }
      if (options_.minutes > 0 && std::chrono::steady_clock::now() - start_ >
                                      std::chrono::duration<double>(options_.minutes * 60)) {
        outcome_.stopped = "time";
        return;
      }
      const std::optional<Candidate> c = proposals.next(results_);
      if (!c) {
        outcome_.stopped = "exhausted";
        return;
      }
      if (!trial(*c)) {
        outcome_.stopped = "interrupted";
        return;
      }
    }
  }

  // One trial: reused from the database when this candidate was measured before, else measured
  // now and recorded at once. While another tune on the same database measures it, this one
  // waits for that record instead of measuring it again. nullopt when the run was interrupted.
  std::optional<TrialRecord> trial(const Candidate& c) {
    const std::string name = c.name();
    const std::string& toolchain = toolchainOf_.at(c.backend);
    const TuningKey& key = outcome_.key;
    const std::string item = key.specHash + " " + key.bucket.text() + " " + key.target + " " +
                             key.hardware + " " + key.attncVersion + " " + toolchain + " " + name;
    // A claim outlives no trial: a compile, a verify and a bench, each within its limit.
    const auto staleClaim =
        options_.compileLimit + 2 * options_.runLimit + std::chrono::seconds(60);
    std::optional<TrialRecord> found;
    if (auto it = earlier_.find(name); it != earlier_.end())
      found = it->second;
    bool announced = false;
    while (!found && !db_.claim(item, staleClaim)) {
      if (!announced)
        observer_.event({{"event", "waiting"},
                         {"candidate", name},
                         {"why", "another tune on this database is measuring it"}});
      announced = true;
      if (measurement_.stopSignal() != 0)
        return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      found = recordedElsewhere(name);
    }
    // Claimed: another tune may still have recorded it since this one last looked.
    if (!found && (found = recordedElsewhere(name)))
      db_.release(item);
    const bool reused = found.has_value();
    if (!reused) {
      const std::string startedAt = utcNow();
      Measured measured;
      try {
        measured = measurement_.measure(spec_, c);
      } catch (...) {
        db_.release(item); // nothing recorded: a later run measures it
        throw;
      }
      if (measured.interrupted) {
        db_.release(item);
        return std::nullopt;
      }
      found = recordOf(c, toolchain, measured, startedAt);
      db_.insert(*found);
      db_.release(item);
      ++outcome_.freshTrials;
      freshSeconds_ += found->seconds;
    }
    tell(*found, name, reused);
    return found;
  }

  // Whether this run takes record `r` for its candidate instead of measuring it: one measured
  // with the backend's toolchain of now, and for a failure, by this very build (a failure from
  // an earlier build of the same version may be a bug fixed since).
  bool reusable(const TrialRecord& r) const {
    const auto toolchain = toolchainOf_.find(r.backend);
    return toolchain != toolchainOf_.end() && toolchain->second == r.toolchain &&
           (r.status == TrialStatus::Ok || (!r.build.empty() && r.build == attncBuild()));
  }

  // The record another tune on this database made of candidate `name` since this one started.
  std::optional<TrialRecord> recordedElsewhere(const std::string& name) {
    std::optional<TrialRecord> found;
    for (TrialRecord& r : db_.trials(outcome_.key))
      if (r.candidate() == name && reusable(r))
        found = std::move(r);
    return found;
  }

  // The record of candidate `c`, measured from `startedAt` on.
  TrialRecord recordOf(const Candidate& c, const std::string& toolchain, const Measured& m,
                       const std::string& startedAt) const {
    TrialRecord r;
    r.uid = newUid();
    r.key = outcome_.key;
    r.backend = c.backend;
    r.toolchain = toolchain;
    r.build = attncBuild();
    r.params = c.values;
    r.status = m.status;
    r.medianMs = m.medianMs;
    r.p10Ms = m.p10Ms;
    r.p90Ms = m.p90Ms;
    r.runs = m.runs;
    r.batch = options_.batch;
    r.seqQ = options_.seqQ;
    r.seqK = options_.seqK;
    r.threads = m.threads ? m.threads : options_.threads;
    r.detail = m.detail;
    r.seconds = m.seconds;
    r.createdAt = startedAt;
    r.seed = options_.seed;
    r.shard = options_.shard.text();
    return r;
  }

  // The trial's result joins the results the search sees, the best so far and the observer.
  void tell(const TrialRecord& record, const std::string& name, bool reused) {
    const double ms = record.status == TrialStatus::Ok ? record.medianMs : kFailed;
    results_[name] = ms;
    if (ms < outcome_.bestMs) {
      outcome_.bestMs = ms;
      outcome_.best = name;
    }
    observer_.event({{"event", "trial"},
                     {"n", results_.size()},
                     {"candidate", name},
                     {"status", statusName(record.status)},
                     {"median_ms", msOrNull(ms)},
                     {"detail", record.detail},
                     {"reused", reused},
                     {"best_ms", msOrNull(outcome_.bestMs)},
                     {"best", outcome_.best}});
    const int done = static_cast<int>(results_.size());
    const double secondsPerTrial = outcome_.freshTrials ? freshSeconds_ / outcome_.freshTrials : 0;
    observer_.progress(done, options_.trials, outcome_.bestMs, outcome_.best,
                       secondsPerTrial * std::max(0, options_.trials - done));
  }

  const Spec& spec_;
  const TuneOptions& options_;
  const std::vector<TuningSpace> spaces_;
  TuningDatabase& db_;
  Measurement& measurement_;
  TuneObserver& observer_;
  const std::chrono::steady_clock::time_point start_;
  std::map<std::string, std::string> toolchainOf_;
  std::map<std::string, TrialRecord> earlier_;
  std::map<std::string, double> results_; // candidate name -> median ms (kFailed: failed)
  double freshSeconds_ = 0;
  TuneOutcome outcome_;
};

} // namespace

TuningKey tuningKey(const Spec& spec, const TuneOptions& o) {
  return {trialsHash(spec), spec.canonical(),      ShapeBucket::of(o.seqQ, o.seqK),
          o.target.name,    hardwareFor(o.target), ATTNC_VERSION};
}

std::string trialsHash(const Spec& spec) {
  return spec.backward ? fnv1a64Hex(spec.canonical() + " timed=forward+backward") : spec.hash();
}

TuneOutcome tune(const Spec& spec, const TuneOptions& options, TuningDatabase& db,
                 Measurement& measurement, TuneObserver& observer) {
  std::vector<TuningSpace> spaces;
  for (TuningSpace& s : tuningSpaces(spec, options.target))
    if (options.backends.empty() || options.backends.count(s.backend)) {
      if (!options.autoschedulers)
        s.generated.clear();
      spaces.push_back(std::move(s));
    }
  if (spaces.empty())
    throw UsageError("--backend: none of the chosen backends can be tuned in this attnc");
  return TuningRun(spec, options, std::move(spaces), db, measurement, observer).run();
}

} // namespace attnc::tuning
