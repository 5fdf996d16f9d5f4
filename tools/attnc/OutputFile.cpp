#include "OutputFile.h"

#include "Support/Errors.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

namespace attnc::tools {
namespace fs = std::filesystem;

namespace {

fs::path directoryOf(const fs::path& path) {
  return path.has_parent_path() ? path.parent_path() : fs::path(".");
}

} // namespace

void checkOutputPath(const fs::path& path) {
  if (path.empty())
    throw UsageError("an output file name is empty");
  std::error_code ignored;
  if (fs::is_directory(path, ignored))
    throw UsageError(path.string() + " is a directory; give a file name");
  if (::access(directoryOf(path).c_str(), W_OK) != 0)
    throw UsageError("cannot write " + path.string() + ": " + std::strerror(errno));
}

fs::path writeTemporaryBeside(const fs::path& path, std::string_view contents) {
  checkOutputPath(path);
  std::error_code ignored;
  const fs::path directory = directoryOf(path);
  std::string temporary = (directory / ("." + path.filename().string() + ".XXXXXX")).string();
  const int fd = ::mkstemp(temporary.data());
  if (fd < 0)
    throw UsageError("cannot write " + path.string() + ": " + std::strerror(errno));
  // mkstemp creates 0600; an output gets the mode a plain create would give it.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  int failure = ::fchmod(fd, 0666 & ~mask) == 0 ? 0 : errno;
  for (size_t done = 0; failure == 0 && done < contents.size();) {
    const ssize_t wrote = ::write(fd, contents.data() + done, contents.size() - done);
    if (wrote < 0 && errno != EINTR)
      failure = errno;
    else if (wrote > 0)
      done += static_cast<size_t>(wrote);
  }
  if (::close(fd) != 0 && failure == 0)
    failure = errno;
  if (failure != 0) {
    fs::remove(temporary, ignored);
    throw JobError("cannot write " + path.string() + ": " + std::strerror(failure));
  }
  return temporary;
}

void writeFileAtomically(const fs::path& path, std::string_view contents) {
  const fs::path temporary = writeTemporaryBeside(path, contents);
  std::error_code error;
  fs::rename(temporary, path, error);
  if (error) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    throw JobError("cannot write " + path.string() + ": " + error.message());
  }
}

} // namespace attnc::tools
