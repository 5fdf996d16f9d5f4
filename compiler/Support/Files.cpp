#include "Support/Files.h"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <locale.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace attnc {
namespace {

constexpr int kEnvironmentErrnos[] = {ENOSPC, EDQUOT, EFBIG, ENOMEM, EMFILE, ENFILE, EIO};

// Reads all of the file open as `fd` into `text`; 0, or the errno of the call that failed.
int readAll(int fd, std::string& text) {
  struct stat status {};
  if (::fstat(fd, &status) != 0)
    return errno;
  text.assign(static_cast<size_t>(status.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t got =
        ::pread(fd, text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (got < 0 && errno != EINTR)
      return errno;
    if (got == 0)
      break; // cut shorter since the fstat
    if (got > 0)
      done += static_cast<size_t>(got);
  }
  text.resize(done);
  return 0;
}

} // namespace

bool isEnvironmentErrno(int error) {
  return std::find(std::begin(kEnvironmentErrnos), std::end(kEnvironmentErrnos), error) !=
         std::end(kEnvironmentErrnos);
}

bool mentionsEnvironmentFailure(std::string_view messages) {
  // Programs translate the system's reasons into the user's language (LC_MESSAGES); attnc
  // itself never sets a locale, so strerror gives the C locale's.
  const locale_t user = newlocale(LC_MESSAGES_MASK, "", static_cast<locale_t>(0));
  bool found = false;
  for (int error : kEnvironmentErrnos) {
    found = found || messages.find(std::strerror(error)) != std::string_view::npos;
    found = found || (user && messages.find(strerror_l(error, user)) != std::string_view::npos);
  }
  if (user)
    freelocale(user);
  return found;
}

int writeAll(int fd, std::string_view contents) {
  for (size_t done = 0; done < contents.size();) {
    const ssize_t wrote = ::write(fd, contents.data() + done, contents.size() - done);
    if (wrote < 0 && errno != EINTR)
      return errno;
    if (wrote > 0)
      done += static_cast<size_t>(wrote);
  }
  return 0;
}

void writeFile(const std::filesystem::path& path, std::string_view contents) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0)
    throwSystemError("cannot write " + path.string(), errno);
  int failure = writeAll(fd, contents);
  // close reports what a file system defers (NFS, quotas) until then.
  if (::close(fd) != 0 && failure == 0)
    failure = errno;
  if (failure != 0)
    throwSystemError("cannot write " + path.string(), failure);
}

void copyFile(const std::filesystem::path& from, const std::filesystem::path& to) {
  const int fd = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throwSystemError("cannot read " + from.string(), errno);
  std::string contents;
  const int failure = readAll(fd, contents);
  ::close(fd);
  if (failure != 0)
    throwSystemError("cannot read " + from.string(), failure);
  writeFile(to, contents);
}

MemoryFile::MemoryFile(const std::string& name) : fd_(::memfd_create(name.c_str(), MFD_CLOEXEC)) {
  if (fd_ < 0)
    throwSystemError("cannot make the file " + name + " in memory", errno);
}

MemoryFile::~MemoryFile() {
  ::close(fd_);
}

std::filesystem::path MemoryFile::path() const {
  return "/proc/self/fd/" + std::to_string(fd_);
}

std::string MemoryFile::contents() const {
  std::string text;
  if (const int failure = readAll(fd_, text))
    throwSystemError("cannot read a file in memory", failure);
  return text;
}

} // namespace attnc
