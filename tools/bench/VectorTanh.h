// Vectorised tanh for the unfused additive baseline (UnfusedBaseline.cpp).
#ifndef ATTNC_TOOLS_BENCH_VECTORTANH_H
#define ATTNC_TOOLS_BENCH_VECTORTANH_H

#include <cstddef>

namespace attnc::bench {

void tanhInPlace(float* x, size_t n);

} // namespace attnc::bench

#endif // ATTNC_TOOLS_BENCH_VECTORTANH_H
