// attnc-fma-peak: the FP32 FMA rate one core of this machine can reach, the denominator of the
// "fraction of peak" figures in docs/benchmarks.md. Twenty independent accumulators of the
// widest vectors this build targets (-march=native) keep every FMA pipe busy; the best of five
// timed repetitions is reported.
#include <chrono>
#include <cstdio>

namespace {

constexpr int kLanes = 16; // 64-byte vectors: AVX-512 registers, or pairs of AVX2 ones
using Vector = float __attribute__((vector_size(kLanes * sizeof(float))));
constexpr int kAccumulators = 20;

double gflopsOnce(long iterations) {
  Vector acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i)
    acc[i] = Vector{} + 1e-3f * static_cast<float>(i);
  const Vector a = Vector{} + 0.999999f, b = Vector{} + 1e-7f;
  auto start = std::chrono::steady_clock::now();
  for (long n = 0; n < iterations; ++n) {
#pragma GCC unroll 20
    for (int i = 0; i < kAccumulators; ++i)
      acc[i] = acc[i] * a + b; // contracted to one FMA per lane; a chain cannot be folded
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  float sink = 0;
  for (int i = 0; i < kAccumulators; ++i)
    sink += acc[i][0];
  volatile float keep = sink; // the result is used, so the loop is not removed
  (void)keep;
  return 2.0 * kLanes * kAccumulators * static_cast<double>(iterations) / seconds / 1e9;
}

} // namespace

int main() {
  double best = 0;
  for (int repetition = 0; repetition < 5; ++repetition) {
    double g = gflopsOnce(50'000'000);
    best = g > best ? g : best;
  }
  std::printf("FP32 FMA peak, one core: %.1f GFLOP/s\n", best);
  return 0;
}
