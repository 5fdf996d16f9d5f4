// The .npy reader: any file is read exactly or refused with a UsageError, and never allocates
// more than the file holds (libFuzzer's -rss_limit_mb catches a reader that does).
#include "Npy.h"
#include "Support/Errors.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace {

// One in-memory file, rewritten for each input, read through its /proc/self/fd path.
int memoryFile() {
  static const int fd = memfd_create("attnc-npy-fuzz", 0);
  return fd;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memoryFile();
  if (fd < 0 || ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size))
    std::abort();
  try {
    const attnc::HostTensor tensor = attnc::npy::read("/proc/self/fd/" + std::to_string(fd));
    if (tensor.bytes() > size) // the data is in the file, after a header
      std::abort();
  } catch (const attnc::UsageError&) {
  }
  return 0;
}
