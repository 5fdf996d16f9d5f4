// attnc tune's run: the search loop over candidates, each measured in child processes
// (compile, verify on a small odd shape, bench with flushed caches), every trial written to
// the database as it ends, progress on a terminal and JSON-lines events otherwise.
#ifndef ATTNC_TOOLS_ATTNC_TUNER_H
#define ATTNC_TOOLS_ATTNC_TUNER_H

#include "Spec/Spec.h"
#include "Tuning/Search.h"
#include "Tuning/TuningDatabase.h"

#include <chrono>
#include <filesystem>
#include <optional>
#include <set>
#include <string>

namespace attnc::tools {

struct TuneOptions {
  std::string target = "host";
  std::set<std::string> backends; // empty: every tunable backend
  int trials = 40;                // in all, counting earlier runs of the same key
  double minutes = 0;             // wall-time budget of this run (0: none)
  uint64_t seed = 1;
  tuning::Strategy strategy = tuning::Strategy::Evolution;
  // Also propose Halide's autoschedulers' schedules (TuningSpace::generated).
  bool autoschedulers = false;
  tuning::Shard shard;
  int64_t batch = 1, seqQ = 1024, seqK = 0; // seqK 0: seqQ
  int threads = 0;                          // 0: all
  int runs = 7, warmup = 1;
  std::chrono::seconds compileLimit{300}, runLimit{120};
  std::filesystem::path events; // also write the JSON-lines events here
};

// The machine fingerprint for a target: the CPU's, or for cuda targets the GPU's (JobError
// when there is none).
std::string hardwareFor(const std::string& target);

// What the trials of this run are recorded under: the spec, the bucket of --seq-q/--seq-k, the
// target, this machine and this attnc.
tuning::TuningKey tuningKey(const Spec& spec, const TuneOptions& options);

// Runs the search; returns the exit code (0, or 130 when interrupted).
int tune(const Spec& spec, const TuneOptions& options, tuning::TuningDatabase& db);

} // namespace attnc::tools

#endif // ATTNC_TOOLS_ATTNC_TUNER_H
