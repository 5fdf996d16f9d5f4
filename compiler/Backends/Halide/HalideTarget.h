// attnc target names for the Halide backend: the Halide target, its schedule family and the
// CPU features a bundle built for it needs.
#ifndef ATTNC_COMPILER_BACKENDS_HALIDE_HALIDETARGET_H
#define ATTNC_COMPILER_BACKENDS_HALIDE_HALIDETARGET_H

#include "Abi/Manifest.h"

#include <Halide.h>
#include <string>
#include <vector>

namespace attnc::halide {

struct HalideTarget {
  Halide::Target target;
  std::string family; // "x86-avx512", "x86-avx2", "arm-neon": picks the default schedule
  Target manifest;    // name, arch, device and the /proc/cpuinfo features it needs
  bool runsHere;      // same architecture as this host: a bundle can be linked and loaded
};

// "host", "x86-64-avx2", "x86-64-avx512", "x86-64-sapphirerapids", "arm-64-linux". Throws
// UsageError listing these for any other name.
HalideTarget resolveHalideTarget(const std::string& name);

// Those names, "host" first.
std::vector<std::string> halideTargetNames();

} // namespace attnc::halide

#endif // ATTNC_COMPILER_BACKENDS_HALIDE_HALIDETARGET_H
