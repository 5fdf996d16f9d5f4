// How the tuner measures a candidate schedule: an interface, so that the search, reuse and
// recording of trials can be tested with made-up timings (tests/unit/TunerTest.cpp), and a real
// measurement runs each step in a child process (ChildProcessMeasurement.h).
#ifndef ATTNC_COMPILER_TUNING_MEASUREMENT_H
#define ATTNC_COMPILER_TUNING_MEASUREMENT_H

#include "Spec/Spec.h"
#include "Tuning/Search.h"
#include "Tuning/TuningRecord.h"

#include <string>

namespace attnc::tuning {

// What measuring one candidate gave: the fields of its trial record that the measurement fills.
struct Measured {
  TrialStatus status = TrialStatus::Failed;
  std::string detail; // why it failed, or what was measured
  double medianMs = 0, p10Ms = 0, p90Ms = 0;
  int runs = 0;
  int threads = 0;    // as the timing reported running them; 0: it did not say
  double seconds = 0; // wall time of the whole measurement
  // It stopped because the run was asked to stop: nothing about the candidate was learnt, and
  // nothing is recorded.
  bool interrupted = false;
};

class Measurement {
public:
  virtual ~Measurement() = default;
  // Compiles `candidate` for `spec`, checks its results against the reference and times it.
  // Throws EnvironmentError when the machine failed the measurement (a full disk): nothing was
  // learnt about the candidate, and the run records nothing of it.
  virtual Measured measure(const Spec& spec, const Candidate& candidate) = 0;
  // The signal the tuning run was asked to stop by, or 0: polled between trials and while
  // waiting on another run's claim.
  virtual int stopSignal() const = 0;
};

} // namespace attnc::tuning

#endif // ATTNC_COMPILER_TUNING_MEASUREMENT_H
