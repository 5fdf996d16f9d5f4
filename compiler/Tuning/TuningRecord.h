// One trial of `attnc tune`: a schedule candidate measured for a spec on a target and machine.
// Every trial is kept, the failed ones too, so that a run can resume, reports can show the
// whole search and merged databases keep each machine's history.
#ifndef ATTNC_COMPILER_TUNING_TUNINGRECORD_H
#define ATTNC_COMPILER_TUNING_TUNINGRECORD_H

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace attnc::tuning {

// Sequence lengths are tuned per power-of-two range: [2^k, 2^(k+1) - 1].
struct ShapeBucket {
  int64_t seqQLo = 1, seqQHi = 1, seqKLo = 1, seqKHi = 1;

  static ShapeBucket of(int64_t seqQ, int64_t seqK);
  bool contains(int64_t seqQ, int64_t seqK) const;
  std::string text() const; // "Tq 1024-2047, Tk 1024-2047"
  bool operator==(const ShapeBucket&) const = default;
};

// What a trial is for. A record answers for a later compile only when all of these match and
// its toolchain is the one the backend has now.
struct TuningKey {
  std::string specHash; // trialsHash(spec) (Tuner.h): Spec::hash(), or with backward=true
                        // the hash of the spec and what its trials time
  std::string spec;     // the canonical spec, for people reading the database
  ShapeBucket bucket;
  std::string target;   // "host", "x86-64-avx512", "cuda-sm_90", ...
  std::string hardware; // hardwareFingerprint()
  std::string attncVersion;
};

// How a trial ended. Only "ok" trials have times.
enum class TrialStatus { Ok, Wrong, Invalid, CompileError, Crash, Timeout, Failed };
const char* statusName(TrialStatus status);
TrialStatus parseStatus(const std::string& name); // throws std::invalid_argument

struct TrialRecord {
  std::string uid; // unique over all machines: merging keeps one copy of each trial
  TuningKey key;
  std::string backend, toolchain;
  nlohmann::json params; // {"name": value}, the whole schedule
  TrialStatus status = TrialStatus::Failed;
  double medianMs = 0, p10Ms = 0, p90Ms = 0;
  int runs = 0;
  int64_t batch = 0, seqQ = 0, seqK = 0; // the measured shape
  int threads = 0;
  std::string detail;    // why it failed, or what was measured
  double seconds = 0;    // wall time of the trial (compile, verify, bench)
  std::string createdAt; // UTC, ISO 8601
  uint64_t seed = 0;
  std::string shard; // "I/N", or "" for a whole search
  std::string build; // attncBuild() of the attnc that measured it; "" in older records

  // The candidate it measured, as the search names candidates: "mlir key_block=128 ...".
  std::string candidate() const;
  nlohmann::json toJson() const;
  static TrialRecord fromJson(const nlohmann::json& json); // throws std::exception on bad input
};

// A fresh uid: 128 random bits as hex.
std::string newUid();
// Now, as "2026-11-21T10:00:00Z".
std::string utcNow();

} // namespace attnc::tuning

#endif // ATTNC_COMPILER_TUNING_TUNINGRECORD_H
