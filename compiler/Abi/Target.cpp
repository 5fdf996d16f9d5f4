#include "Abi/Target.h"

#include "Support/Errors.h"

#include <array>

namespace attnc {
namespace {

struct NamedTarget {
  const char* name;
  Architecture architecture;
  IsaLevel isa;
  Device device;
  int cudaCapability;
};

constexpr Architecture kHost =
#if defined(__x86_64__)
    Architecture::X86_64;
#elif defined(__aarch64__)
    Architecture::AArch64;
#else
#error "attnc supports x86-64 and AArch64 hosts"
#endif

constexpr std::array kTargets{
    NamedTarget{"host", kHost, IsaLevel::Native, Device::Cpu, 0},
    NamedTarget{"x86-64-avx2", Architecture::X86_64, IsaLevel::Avx2, Device::Cpu, 0},
    NamedTarget{"x86-64-avx512", Architecture::X86_64, IsaLevel::Avx512, Device::Cpu, 0},
    NamedTarget{"x86-64-zen4", Architecture::X86_64, IsaLevel::Zen4, Device::Cpu, 0},
    NamedTarget{"x86-64-sapphirerapids", Architecture::X86_64, IsaLevel::SapphireRapids,
                Device::Cpu, 0},
    NamedTarget{"arm-64-linux", Architecture::AArch64, IsaLevel::Neon, Device::Cpu, 0},
    NamedTarget{"cuda-sm_80", kHost, IsaLevel::Native, Device::Cuda, 80},
    NamedTarget{"cuda-sm_90", kHost, IsaLevel::Native, Device::Cuda, 90},
};

} // namespace

std::string Target::cudaArch() const {
  return isCuda() ? "sm_" + std::to_string(cudaCapability) : "";
}

Target parseTarget(const std::string& name) {
  for (const NamedTarget& t : kTargets)
    if (name == t.name)
      return {name, t.architecture, t.isa, t.device, t.cudaCapability};
  std::string known;
  for (const std::string& n : targetNames())
    known += " " + n;
  throw UsageError("--target " + name + ": not a target attnc knows; known:" + known);
}

const std::vector<std::string>& targetNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all;
    for (const NamedTarget& t : kTargets)
      all.emplace_back(t.name);
    return all;
  }();
  return names;
}

Architecture hostArchitecture() { return kHost; }

std::string_view architectureName(Architecture architecture) {
  return architecture == Architecture::AArch64 ? "aarch64" : "x86_64";
}

std::string_view deviceName(Device device) { return device == Device::Cuda ? "cuda" : "cpu"; }

} // namespace attnc
