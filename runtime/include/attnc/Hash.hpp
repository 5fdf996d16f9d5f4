// Stable content hashes: FNV-1a 64, printed as 16 hex digits. Not cryptographic; they name
// artifacts, key the tuning database and seal a manifest (its "content_hash", which the runtime
// checks at load), so they must never change.
#ifndef ATTNC_HASH_HPP
#define ATTNC_HASH_HPP

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace attnc {

inline uint64_t fnv1a64(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

inline std::string fnv1a64Hex(std::string_view text) {
  const uint64_t h = fnv1a64(text);
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

} // namespace attnc

#endif // ATTNC_HASH_HPP
