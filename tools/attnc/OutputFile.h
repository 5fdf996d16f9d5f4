// Output files that appear whole or not at all: written to a temporary file in the same
// directory, then renamed over the target (atomic within a file system).
#ifndef ATTNC_TOOLS_ATTNC_OUTPUTFILE_H
#define ATTNC_TOOLS_ATTNC_OUTPUTFILE_H

#include "Support/TemporaryPaths.h"

#include <filesystem>
#include <memory>
#include <string_view>

namespace attnc::tools {

// Throws UsageError, with the reason, when `path` cannot become an output file: it is empty or
// a directory, or its directory is missing or not writable. Lets a command refuse before it
// does its work; StagedFile checks again when it writes.
void checkOutputPath(const std::filesystem::path& path);

// `contents` written in full to a new hidden file beside `path` (".NAME.XXXXXX", mode 0666 less
// the umask), registered as a temporary path from its creation, so that an interrupt removes it
// too; commit() renames it over `path`, and one never committed is removed. Throws UsageError,
// with the system's reason, when `path` cannot be written (see checkOutputPath); JobError when
// the write itself fails, EnvironmentError when the disk is full (Support/Files.h).
class StagedFile {
public:
  StagedFile(const std::filesystem::path& path, std::string_view contents);
  ~StagedFile();
  StagedFile(StagedFile&& other) noexcept;
  StagedFile& operator=(StagedFile&&) = delete;
  void commit();

private:
  std::filesystem::path path_, temporary_; // temporary_ empty once committed or moved from
  std::unique_ptr<TemporaryPath> registration_;
};

// StagedFile(path, contents).commit().
void writeFileAtomically(const std::filesystem::path& path, std::string_view contents);

} // namespace attnc::tools

#endif // ATTNC_TOOLS_ATTNC_OUTPUTFILE_H
