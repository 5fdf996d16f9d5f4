// NumPy .npy files (format 1.0-3.0), little-endian, C order, for the CLI's inputs and outputs.
#ifndef ATTNC_TOOLS_NPY_H
#define ATTNC_TOOLS_NPY_H

#include "Support/HostTensor.h"

#include <filesystem>

namespace attnc::npy {

// Reads f64, f32, f16, i64, i32 or u8 arrays (bool as u8). Throws UsageError naming the file and
// what is wrong with it.
HostTensor read(const std::filesystem::path& path);

// Writes f64, f32, f16, i32 or u8 tensors; bf16 (which NumPy lacks) is written as f32.
// Writes to a temporary file first so that a failure never leaves a partial file.
void write(const std::filesystem::path& path, const HostTensor& tensor);

} // namespace attnc::npy

#endif // ATTNC_TOOLS_NPY_H
