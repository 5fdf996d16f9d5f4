// NumPy .npy files (format 1.0-3.0), little-endian, C order, for the CLI's inputs and outputs.
#ifndef ATTNC_TOOLS_ATTNC_NPY_H
#define ATTNC_TOOLS_ATTNC_NPY_H

#include "OutputFile.h"
#include "Support/HostTensor.h"

#include <filesystem>

namespace attnc::npy {

// Reads f64, f32, f16, i64, i32 or u8 arrays (bool as u8). Throws UsageError naming the file and
// what is wrong with it.
HostTensor read(const std::filesystem::path& path);

// A .npy file written in full to a temporary file beside `path` (f64, f32, f16, i32 or u8;
// bf16, which NumPy lacks, as f32); commit() renames it into place, and a write never committed
// leaves nothing behind, interrupted or not (OutputFile.h). Several outputs are committed only
// after all were written, so a failure leaves no partial set either. Throws UsageError for a
// path that cannot be written.
class PendingWrite {
public:
  PendingWrite(const std::filesystem::path& path, const HostTensor& tensor);
  void commit() { file_.commit(); }

private:
  tools::StagedFile file_;
};

// PendingWrite(path, tensor).commit().
void write(const std::filesystem::path& path, const HostTensor& tensor);

} // namespace attnc::npy

#endif // ATTNC_TOOLS_ATTNC_NPY_H
