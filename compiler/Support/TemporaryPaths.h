// Paths a command is writing and removes when it finishes (a compile's staging directory, an
// output's temporary file). Registered while they exist, so that a command ended by a signal
// or by LLVM can still remove them: attnc's interrupt thread and its LLVM fatal-error handler
// (tools/attnc/FatalErrors.h) call removeTemporaryPaths() before the process dies.
#ifndef ATTNC_COMPILER_SUPPORT_TEMPORARYPATHS_H
#define ATTNC_COMPILER_SUPPORT_TEMPORARYPATHS_H

#include <filesystem>

namespace attnc {

// Registers `path` for its lifetime; removing the path itself stays its owner's job.
class TemporaryPath {
public:
  explicit TemporaryPath(std::filesystem::path path);
  ~TemporaryPath();
  TemporaryPath(const TemporaryPath&) = delete;
  TemporaryPath& operator=(const TemporaryPath&) = delete;

private:
  std::filesystem::path path_;
};

// Removes every registered path (files, or directories with their contents); thread-safe.
void removeTemporaryPaths();

} // namespace attnc

#endif // ATTNC_COMPILER_SUPPORT_TEMPORARYPATHS_H
