// The tuner's real measurement: the attnc executable run as a child for each step, with a time
// limit each, so a candidate that crashes, hangs or computes wrong costs its trial only:
//   attnc compile --schedule <candidate>   (exit 2: the backend refuses the combination)
//   attnc verify on B=2, Tq=37, Tk=53      (odd sizes no tile divides, Tq != Tk)
//   attnc bench --json --flush-caches      on the options' shape
#ifndef ATTNC_COMPILER_TUNING_CHILDPROCESSMEASUREMENT_H
#define ATTNC_COMPILER_TUNING_CHILDPROCESSMEASUREMENT_H

#include "Tuning/ChildProcess.h"
#include "Tuning/Tuner.h"

#include <filesystem>

namespace attnc::tuning {

class ChildProcessMeasurement : public Measurement {
public:
  ChildProcessMeasurement(std::filesystem::path attnc, TuneOptions options, StopRequest stop);
  Measured measure(const Spec& spec, const Candidate& candidate) override;
  int stopSignal() const override { return stop_.signal(); }

private:
  std::filesystem::path attnc_;
  TuneOptions options_;
  StopRequest stop_;
};

} // namespace attnc::tuning

#endif // ATTNC_COMPILER_TUNING_CHILDPROCESSMEASUREMENT_H
