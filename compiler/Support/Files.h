// Files written so that no failure goes unseen: every write and the close are checked, and a
// machine that ran out of room (EnvironmentError) is told apart from a path that cannot be
// written. What a library or a child process writes goes to a MemoryFile first, where a full
// disk cannot cut it short, and is written where it belongs by writeFile.
#ifndef ATTNC_COMPILER_SUPPORT_FILES_H
#define ATTNC_COMPILER_SUPPORT_FILES_H

#include "Support/Errors.h"

#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

namespace attnc {

// Whether errno `error` says that the machine ran out of something (disk space, a quota, the
// file-size limit, memory, file descriptors) or that its disk failed.
bool isEnvironmentErrno(int error);

// Throws "<what>: <the system's reason>": an EnvironmentError when isEnvironmentErrno(error),
// else an E (JobError; UsageError where the user named the path).
template <class E = JobError>
[[noreturn]] void throwSystemError(const std::string& what, int error) {
  if (isEnvironmentErrno(error))
    throw EnvironmentError(what + ": " + std::strerror(error));
  throw E(what + ": " + std::strerror(error));
}

// Whether a program's messages name one of isEnvironmentErrno's errors, in the C locale or the
// user's: a linker that failed on a full disk says so only there.
bool mentionsEnvironmentFailure(std::string_view messages);

// Writes all of `contents` to `fd`; 0, or the errno of the write that failed.
int writeAll(int fd, std::string_view contents);

// `contents` as the whole of `path`, created or truncated, and closed. Throws
// throwSystemError("cannot write <path>", errno) when any step fails, leaving what was written
// to the caller, who writes into a staging directory (Link/BundleWriter.h's OutputStaging).
void writeFile(const std::filesystem::path& path, std::string_view contents);

// `from` copied to `to` by writeFile: a failed write names its reason (libstdc++'s copy_file
// reports a full disk as an I/O error). Throws as throwSystemError.
void copyFile(const std::filesystem::path& from, const std::filesystem::path& to);

// A file in memory (memfd_create), gone with its last descriptor.
class MemoryFile {
public:
  explicit MemoryFile(const std::string& name); // throws as throwSystemError
  ~MemoryFile();
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  int fd() const { return fd_; }
  // /proc/self/fd/N: whoever opens it by this name opens this file.
  std::filesystem::path path() const;
  std::string contents() const; // throws as throwSystemError

private:
  int fd_;
};

} // namespace attnc

#endif // ATTNC_COMPILER_SUPPORT_FILES_H
