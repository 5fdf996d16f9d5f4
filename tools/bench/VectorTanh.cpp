// tanh over an array with glibc's vector math (libmvec), as eager frameworks' vectorised tanh:
// -ffast-math (this file only) lets GCC call the SIMD variants, one clone per ISA.
#include "VectorTanh.h"

#include <cmath>

namespace attnc::bench {

__attribute__((target_clones("avx512f", "avx2", "default"))) void tanhInPlace(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i)
    x[i] = std::tanh(x[i]);
}

} // namespace attnc::bench
