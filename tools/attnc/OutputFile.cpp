#include "OutputFile.h"

#include "Support/Errors.h"
#include "Support/Files.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

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

StagedFile::StagedFile(const fs::path& path, std::string_view contents) : path_(path) {
  checkOutputPath(path);
  std::string name = (directoryOf(path) / ("." + path.filename().string() + ".XXXXXX")).string();
  const int fd = ::mkstemp(name.data());
  if (fd < 0)
    throwSystemError<UsageError>("cannot write " + path.string(), errno);
  temporary_ = name;
  registration_ = std::make_unique<TemporaryPath>(temporary_);
  // mkstemp creates 0600; an output gets the mode a plain create would give it.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  int failure = ::fchmod(fd, 0666 & ~mask) == 0 ? 0 : errno;
  if (failure == 0)
    failure = writeAll(fd, contents);
  if (::close(fd) != 0 && failure == 0)
    failure = errno;
  if (failure != 0) {
    std::error_code ignored; // no destructor runs for a constructor that throws
    fs::remove(temporary_, ignored);
    throwSystemError("cannot write " + path.string(), failure);
  }
}

StagedFile::StagedFile(StagedFile&& other) noexcept
    : path_(std::move(other.path_)), temporary_(std::exchange(other.temporary_, {})),
      registration_(std::move(other.registration_)) {}

StagedFile::~StagedFile() {
  if (!temporary_.empty()) {
    std::error_code ignored;
    fs::remove(temporary_, ignored);
  }
}

void StagedFile::commit() {
  std::error_code error;
  fs::rename(temporary_, path_, error);
  if (error)
    throwSystemError("cannot write " + path_.string(), error.value());
  temporary_.clear();
  registration_.reset();
}

void writeFileAtomically(const fs::path& path, std::string_view contents) {
  StagedFile(path, contents).commit();
}

} // namespace attnc::tools
