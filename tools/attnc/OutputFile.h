// Output files that appear whole or not at all: written to a temporary file in the same
// directory, then renamed over the target (atomic within a file system).
#ifndef ATTNC_TOOLS_OUTPUTFILE_H
#define ATTNC_TOOLS_OUTPUTFILE_H

#include <filesystem>
#include <string_view>

namespace attnc::tools {

// Throws UsageError, with the reason, when `path` cannot become an output file: it is empty or
// a directory, or its directory is missing or not writable. Lets a command refuse before it
// does its work; writeTemporaryBeside checks again when it writes.
void checkOutputPath(const std::filesystem::path& path);

// Writes `contents` to a new hidden file beside `path` (".NAME.XXXXXX", mode 0666 less the
// umask) and returns its path. Throws UsageError, with the system's reason, when `path` is
// empty, a directory, or in a directory that is missing or not writable; JobError when the
// write itself fails (a full disk), after removing the temporary file.
std::filesystem::path writeTemporaryBeside(const std::filesystem::path& path,
                                           std::string_view contents);

// writeTemporaryBeside, then the rename into place.
void writeFileAtomically(const std::filesystem::path& path, std::string_view contents);

} // namespace attnc::tools

#endif // ATTNC_TOOLS_OUTPUTFILE_H
