#include "HostCpu.h"

#include <fstream>
#include <sstream>

#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace attnc::runtime {

const char* hostArch() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "unknown";
#endif
}

const std::set<std::string>& hostCpuFeatures() {
  static const std::set<std::string> features = [] {
    std::set<std::string> result;
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpuinfo, line)) {
      // x86 lists "flags : ...", AArch64 "Features : ...": one line per core, all alike.
      if (!line.starts_with("flags") && !line.starts_with("Features"))
        continue;
      std::istringstream words(line.substr(line.find(':') + 1));
      std::string word;
      while (words >> word)
        result.insert(word);
      break;
    }
    return result;
  }();
  return features;
}

std::string requestAmxTiles() {
#if defined(__x86_64__) && defined(__linux__)
  // asm/prctl.h's ARCH_REQ_XCOMP_PERM and the XTILEDATA state component (xsave bit 18).
  constexpr int kRequestPermission = 0x1023, kTileData = 18;
  if (syscall(SYS_arch_prctl, kRequestPermission, kTileData) != 0)
    return "Linux refused the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM)";
  return "";
#else
  return "AMX tiles exist only on x86-64 Linux";
#endif
}

} // namespace attnc::runtime
