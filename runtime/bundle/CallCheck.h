// What every bundle entry checks of a call before running it: the caller's ABI version and an
// entry the bundle holds.
#ifndef ATTNC_RUNTIME_BUNDLE_CALLCHECK_H
#define ATTNC_RUNTIME_BUNDLE_CALLCHECK_H

#include "attnc/attnc.h"

#include <cstdio>

namespace attnc {

// Whether this bundle can take the call: the same ABI version, and the forward entry, or the
// backward where `holdsBackward`. Writes why not.
inline bool acceptCall(const attnc_kernel_call& call, bool holdsBackward, char* message,
                       size_t messageSize) {
  if (call.abi_version != ATTNC_ABI_VERSION) {
    std::snprintf(message, messageSize, "caller uses ABI version %u; this bundle has %u",
                  call.abi_version, ATTNC_ABI_VERSION);
    return false;
  }
  if (call.entry == ATTNC_ENTRY_FORWARD || (call.entry == ATTNC_ENTRY_BACKWARD && holdsBackward))
    return true;
  std::snprintf(message, messageSize, "this bundle holds no entry %u (%s)", call.entry,
                call.entry == ATTNC_ENTRY_BACKWARD ? "backward; compile with backward=true"
                                                   : "unknown");
  return false;
}

} // namespace attnc

#endif // ATTNC_RUNTIME_BUNDLE_CALLCHECK_H
