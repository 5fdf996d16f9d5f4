// Which build of attnc is running: a failed trial says as much about the build that measured it
// as about the candidate (a bug fixed since, in the same version, makes it compile), so only
// that build reuses it.
#ifndef ATTNC_COMPILER_TUNING_BUILDIDENTITY_H
#define ATTNC_COMPILER_TUNING_BUILDIDENTITY_H

#include <string>

namespace attnc::tuning {

// 16 hex digits hashed from the GNU build IDs (the linker's hash of each linked file) of the
// running program and of attnc's own shared libraries loaded in it; "" when none has one (a
// linker without --build-id), which matches no record.
const std::string& attncBuild();

} // namespace attnc::tuning

#endif // ATTNC_COMPILER_TUNING_BUILDIDENTITY_H
