// attnc tune's run: every tunable backend's default, then the search's proposals, each one a
// trial measured once (a Measurement) and recorded in the tuning database as it ends. Trials of
// the same key and toolchain recorded before are reused, and a candidate another run on the
// same database is measuring is waited for, not measured twice.
#ifndef ATTNC_COMPILER_TUNING_TUNER_H
#define ATTNC_COMPILER_TUNING_TUNER_H

#include "Spec/Spec.h"
#include "Tuning/Measurement.h"
#include "Tuning/Search.h"
#include "Tuning/TuningDatabase.h"

#include <chrono>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

namespace attnc::tuning {

struct TuneOptions {
  Target target = parseTarget("host");
  std::set<std::string> backends; // empty: every tunable backend
  int trials = 40;                // in all, counting earlier runs of the same key
  double minutes = 0;             // wall-time budget of this run (0: none)
  uint64_t seed = 1;
  Strategy strategy = Strategy::Evolution;
  // Also propose Halide's autoschedulers' schedules (TuningSpace::generated).
  bool autoschedulers = false;
  Shard shard;
  int64_t batch = 1, seqQ = 1024, seqK = 0; // the shape timed; seqK 0: seqQ
  int threads = 0;                          // 0: all
  int runs = 7, warmup = 1;
  std::chrono::seconds compileLimit{300}, runLimit{120};
};

// What the run tells as it goes: events (start, waiting, trial, backend_left_out, done) as
// JSON objects, and after each trial how far it is.
class TuneObserver {
public:
  virtual ~TuneObserver() = default;
  virtual void event(const nlohmann::json& event) = 0;
  // `done` of `budget` trials; the best median so far (infinity: none yet) and its candidate;
  // the time the trials left will take at the fresh ones' average.
  virtual void progress(int done, int budget, double bestMs, const std::string& best,
                        double secondsLeft) = 0;
};

// How a run ended.
struct TuneOutcome {
  TuningKey key;       // what the trials are recorded under
  std::string stopped; // "trials", "time", "exhausted" or "interrupted"
  int interruptSignal = 0;
  int trials = 0, freshTrials = 0;
  std::string best, defaultName; // candidates' names
  double bestMs = std::numeric_limits<double>::infinity(); // infinity: no trial succeeded
  double defaultMs = std::numeric_limits<double>::infinity();
};

// What the trials of a run are recorded under: the spec, the bucket of the timed shape, the
// target, this machine and this attnc.
TuningKey tuningKey(const Spec& spec, const TuneOptions& options);

// The hash a spec's trials are recorded and found under: Spec::hash(), and for a spec with
// backward=true, whose trials time a training step (the forward and the backward), the hash
// of its canonical text with that said, so that no trial timing the forward alone (as attnc
// tune did before it timed the backward) answers for it.
std::string trialsHash(const Spec& spec);

// Runs the search. Throws UsageError when none of options.backends can be tuned, and the
// measurement's EnvironmentError when the machine fails a trial: the trials before it stay
// recorded, and that one is measured by the next run.
TuneOutcome tune(const Spec& spec, const TuneOptions& options, TuningDatabase& db,
                 Measurement& measurement, TuneObserver& observer);

} // namespace attnc::tuning

#endif // ATTNC_COMPILER_TUNING_TUNER_H
