// The machine a tuning record was measured on. Records answer only for the same fingerprint:
// a schedule fast on one CPU model, core count or GPU says little about another.
#ifndef ATTNC_COMPILER_TUNING_HARDWARE_H
#define ATTNC_COMPILER_TUNING_HARDWARE_H

#include "Abi/Target.h"

#include <string>

namespace attnc::tuning {

// "cpu: <model name>, <N> cores, <the SIMD features attnc's targets use>", from /proc/cpuinfo.
std::string cpuFingerprint();

// The fingerprint for a target: the CPU's, or for cuda targets the GPU's, "gpu: <name>,
// sm_<major><minor>, driver <version>" (JobError when there is none).
std::string hardwareFor(const Target& target);

} // namespace attnc::tuning

#endif // ATTNC_COMPILER_TUNING_HARDWARE_H
