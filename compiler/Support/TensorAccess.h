// Element access to DLPack tensors through their strides, in double precision.
#ifndef ATTNC_COMPILER_SUPPORT_TENSORACCESS_H
#define ATTNC_COMPILER_SUPPORT_TENSORACCESS_H

#include <cstdint>
#include <dlpack/dlpack.h>
#include <vector>

namespace attnc {

int64_t elementCount(const DLTensor& t);

// Every element of t (f64, f32, f16, bf16, i64, i32 or u8) as a double, densely in row-major
// order of t's own shape, whatever its strides.
std::vector<double> readDense(const DLTensor& t);

// Stores values (dense, row-major in t's shape) into t through its strides, rounding once to
// t's dtype (integer dtypes: truncated toward zero; NaN, or a value outside the dtype's range,
// throws std::invalid_argument).
void writeDense(DLTensor& t, const std::vector<double>& values);

} // namespace attnc

#endif // ATTNC_COMPILER_SUPPORT_TENSORACCESS_H
