// Checking a call's tensors against the manifest before a kernel sees them.
#ifndef ATTNC_RUNTIME_TENSORCHECK_H
#define ATTNC_RUNTIME_TENSORCHECK_H

#include "RuntimeManifest.h"

#include <optional>
#include <string>
#include <vector>

namespace attnc::runtime {

// Binds B, Tq and Tk from the tensors (in manifest order, the first plain use of each), then
// checks every tensor's device ("cpu" or "cuda": the chosen target's), dtype, rank, extents and
// strides. Returns the first problem as a message naming the argument, what it has and what
// the manifest allows.
std::optional<std::string> checkTensors(const RuntimeManifest& manifest, const std::string& device,
                                        const std::vector<DLTensor*>& tensors, RunSizes& sizes);

} // namespace attnc::runtime

#endif // ATTNC_RUNTIME_TENSORCHECK_H
