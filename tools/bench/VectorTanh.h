// Vectorised tanh for the unfused additive baseline (UnfusedBaseline.cpp).
#ifndef ATTNC_TOOLS_ATTNC_VECTORTANH_H
#define ATTNC_TOOLS_ATTNC_VECTORTANH_H

#include <cstddef>

namespace attnc::tools {

void tanhInPlace(float* x, size_t n);

} // namespace attnc::tools

#endif // ATTNC_TOOLS_ATTNC_VECTORTANH_H
