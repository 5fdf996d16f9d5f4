// The host toolchain pieces attnc uses to link bundles, and where attnc's own archives live.
#ifndef ATTNC_COMPILER_LINK_TOOLCHAIN_H
#define ATTNC_COMPILER_LINK_TOOLCHAIN_H

#include <filesystem>
#include <string>
#include <vector>

namespace attnc {

// The C++ driver that assembles and links bundles: $ATTNC_CXX, else the compiler attnc was
// built with, else `c++` from PATH.
std::string linkerDriver();

// Directory holding attnc's bundle archives (libattnc_core.a, libattnc_bundle_*.a):
// $ATTNC_LIB_DIR, else <directory of this executable>/../lib/attnc (installed) or ../lib (the
// build tree). Throws JobError naming where it looked when `archive` is not there.
std::filesystem::path findArchive(const std::string& archive);

// Runs argv (no shell), its stdout and stderr kept in memory: a full disk cannot swallow what
// it says. Throws JobError when the program cannot be started (naming it, with `hint`: how to
// point attnc at another one) or exits non-zero ("<what> failed", its exit status, 128+N for
// signal N, and what it said); EnvironmentError when what it said names a full disk or the
// like (mentionsEnvironmentFailure).
void runTool(const std::vector<std::string>& argv, const std::string& what,
             const std::string& hint);

} // namespace attnc

#endif // ATTNC_COMPILER_LINK_TOOLCHAIN_H
