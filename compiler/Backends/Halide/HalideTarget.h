// An attnc Target in the Halide backend's terms: the Halide target, its schedule family and the
// CPU features a bundle built for it needs.
#ifndef ATTNC_COMPILER_BACKENDS_HALIDE_HALIDETARGET_H
#define ATTNC_COMPILER_BACKENDS_HALIDE_HALIDETARGET_H

#include "Abi/Manifest.h"
#include "ScheduleFamily.h"

#include <Halide.h>

namespace attnc::halide {

struct HalideTarget {
  Halide::Target target;
  ScheduleFamily family; // X86Avx512, X86Avx2, ArmNeon or Cuda: picks the default schedule
  TargetNeeds needs;     // the target and the /proc/cpuinfo features its code needs
  bool runsHere;         // same architecture as this host: a bundle can be linked and loaded
};

HalideTarget resolveHalideTarget(const attnc::Target& target);

} // namespace attnc::halide

#endif // ATTNC_COMPILER_BACKENDS_HALIDE_HALIDETARGET_H
