#include "HostCpu.h"

#include <fstream>
#include <sstream>

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

} // namespace attnc::runtime
