// The runtime's manifest reader: any text is parsed or refused with a message (a missing or
// mistyped field, a bad dimension, a content hash that does not match), never a crash.
#include "RuntimeManifest.h"

#include <cstdint>
#include <stdexcept>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    attnc::runtime::parseRuntimeManifest(
        std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const std::exception&) {
  }
  return 0;
}
