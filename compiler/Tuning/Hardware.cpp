#include "Tuning/Hardware.h"

#include "Support/Errors.h"
#include "attnc/CudaDriver.hpp"

#include <array>
#include <fmt/core.h>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

namespace attnc::tuning {

std::string cpuFingerprint() {
  // The features that change which code attnc generates or how fast it runs.
  static constexpr std::array kFeatures{"avx2",        "fma",      "avx512f", "avx512bw",
                                        "avx512_bf16", "amx_tile", "asimd",   "sve"};
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  std::set<std::string> flags;
  while (std::getline(cpuinfo, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos)
      continue;
    std::string name = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    std::string value = line.substr(std::min(line.size(), colon + 2));
    if (name == "model name" || name == "Model")
      model = value;
    else if ((name == "flags" || name == "Features") && flags.empty()) {
      std::istringstream words(value);
      for (std::string w; words >> w;)
        flags.insert(w);
    }
  }
  std::string text =
      "cpu: " + model + ", " + std::to_string(std::thread::hardware_concurrency()) + " cores,";
  for (const char* feature : kFeatures)
    if (flags.count(feature))
      text += std::string(" ") + feature;
  return text;
}

std::string hardwareFor(const Target& target) {
  if (!target.isCuda())
    return cpuFingerprint();
  cuda::Device device;
  std::string why;
  if (!cuda::useDevice(&device, &why))
    throw JobError("tuning for --target " + target.name +
                   " measures on an NVIDIA GPU, and there is none here: " + why);
  return fmt::format("gpu: {}, sm_{}{}, driver {}", device.name, device.major, device.minor,
                     device.driverVersion);
}

} // namespace attnc::tuning
