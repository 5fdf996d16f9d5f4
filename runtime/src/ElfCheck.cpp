#include "ElfCheck.h"

#include <cerrno>
#include <cstring>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace attnc::runtime {
namespace {

// Reads exactly `size` bytes at `offset`; false past the end of the file or on an error.
bool readAt(int fd, uint64_t offset, void* out, size_t size) {
  auto* bytes = static_cast<char*>(out);
  while (size > 0) {
    ssize_t got = ::pread(fd, bytes, size, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return false;
    bytes += got;
    offset += static_cast<uint64_t>(got);
    size -= static_cast<size_t>(got);
  }
  return true;
}

// Whether [offset, offset + count * entrySize) lies within the file's `size` bytes.
bool within(uint64_t offset, uint64_t count, uint64_t entrySize, uint64_t size) {
  uint64_t bytes = 0;
  return !__builtin_mul_overflow(count, entrySize, &bytes) && offset <= size &&
         bytes <= size - offset;
}

class File {
public:
  explicit File(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {}
  ~File() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  int fd() const { return fd_; }

private:
  int fd_;
};

} // namespace

std::optional<std::string> sharedObjectProblem(const std::string& path) {
  File file(path);
  if (file.fd() < 0)
    return std::string("cannot open it: ") + std::strerror(errno);
  struct stat status {};
  if (::fstat(file.fd(), &status) != 0)
    return std::string("cannot stat it: ") + std::strerror(errno);
  if (!S_ISREG(status.st_mode))
    return std::string("it is not a regular file");
  const auto size = static_cast<uint64_t>(status.st_size);
  Elf64_Ehdr header{};
  if (!readAt(file.fd(), 0, &header, sizeof(header)) ||
      std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0)
    return std::string("it is not an ELF file");
  if (header.e_ident[EI_CLASS] != ELFCLASS64)
    return std::string("it is a 32-bit ELF file; bundles are 64-bit");
  if (header.e_type != ET_DYN)
    return std::string("it is an ELF file but not a shared object (e_type ") +
           std::to_string(header.e_type) + ")";
  if (header.e_phentsize != sizeof(Elf64_Phdr) ||
      (header.e_shoff != 0 && header.e_shentsize != sizeof(Elf64_Shdr)))
    return std::string("its ELF header is damaged (header entry sizes ") +
           std::to_string(header.e_phentsize) + " and " + std::to_string(header.e_shentsize) + ")";
  const std::string truncated = "it is truncated: the file has " + std::to_string(size) + " bytes";
  if (!within(header.e_phoff, header.e_phnum, sizeof(Elf64_Phdr), size))
    return truncated + " and its program headers reach past them";
  if (header.e_shoff != 0 && !within(header.e_shoff, header.e_shnum, sizeof(Elf64_Shdr), size))
    return truncated + " and its section headers reach past them";
  std::vector<Elf64_Phdr> segments(header.e_phnum);
  if (!readAt(file.fd(), header.e_phoff, segments.data(), segments.size() * sizeof(Elf64_Phdr)))
    return truncated;
  for (const Elf64_Phdr& segment : segments)
    if ((segment.p_type == PT_LOAD || segment.p_type == PT_DYNAMIC) &&
        !within(segment.p_offset, segment.p_filesz, 1, size))
      return truncated + "; a loadable segment needs " +
             std::to_string(segment.p_offset + segment.p_filesz);
  return std::nullopt;
}

} // namespace attnc::runtime
