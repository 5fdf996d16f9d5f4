// attnc-fma-peak: the FP32 FMA rate one core of this machine can reach, the denominator of the
// "fraction of peak" figures in docs/benchmarks.md. Independent accumulators of the widest
// vectors this build targets (-march=native), as many as its registers hold, keep every FMA
// pipe busy; the best of five timed repetitions is reported.
//
// With --bf16, the core's bf16 rates instead, the limits of kernels that multiply bf16 with f32
// accumulation: AVX512-BF16's `vdpbf16ps` (16 lanes x 2 products into f32) and AMX's
// `tdpbf16ps` (a 16 x 16 f32 tile += 16 x 32 bf16 times 32 x 16 bf16), each line saying why
// when this CPU or its kernel has no such unit (the runtime's hostCpuFeatures).
#include "HostCpu.h"

#include <immintrin.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

// As many accumulators as the register file holds beside a and b, enough chains to cover
// the FMA's latency on every pipe: 20 of AVX-512's 32 zmm registers, 12 of AVX2's 16 ymm ones
// (20 ymm accumulators spilled to memory on an AMD Zen 3, reading 6.6 GFLOP/s).
#if defined(__AVX512F__)
constexpr int kLanes = 16;
constexpr int kAccumulators = 20;
#else
constexpr int kLanes = 8;
constexpr int kAccumulators = 12;
#endif
using Vector = float __attribute__((vector_size(kLanes * sizeof(float))));
constexpr int kRepetitions = 5;

// GFLOP/s of `flops` floating-point operations that took `since` until now.
double gflopsSince(std::chrono::steady_clock::time_point since, double flops) {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
  return flops / seconds / 1e9;
}

double fmaGflopsOnce(long iterations) {
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
  const double gflops = gflopsSince(start, 2.0 * kLanes * kAccumulators * iterations);
  float sink = 0;
  for (int i = 0; i < kAccumulators; ++i)
    sink += acc[i][0];
  volatile float keep = sink; // the result is used, so the loop is not removed
  (void)keep;
  return gflops;
}

// vdpbf16ps: lane i += a[2i] b[2i] + a[2i+1] b[2i+1], 4 floating-point operations a lane.
__attribute__((target("avx512f,avx512bf16"))) double dotGflopsOnce(long iterations) {
  __m512 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i)
    acc[i] = _mm512_set1_ps(1e-3f * static_cast<float>(i));
  // bf16 pairs of 1.0 and 2^-20 (0x3f80, 0x3580): the sums grow slowly and stay finite.
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80);
  const __m512bh b = (__m512bh)_mm512_set1_epi32(0x35803580);
  auto start = std::chrono::steady_clock::now();
  for (long n = 0; n < iterations; ++n) {
#pragma GCC unroll 20
    for (int i = 0; i < kAccumulators; ++i)
      acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  }
  const double gflops = gflopsSince(start, 4.0 * kLanes * kAccumulators * iterations);
  float sink = 0;
  for (int i = 0; i < kAccumulators; ++i)
    sink += _mm512_cvtss_f32(acc[i]);
  volatile float keep = sink;
  (void)keep;
  return gflops;
}

// The tile configuration of ldtilecfg (palette 1): every tile 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  unsigned char palette = 1, startRow = 0, reserved[14] = {};
  unsigned short bytesPerRow[16] = {};
  unsigned char rows[16] = {};
};

// tdpbf16ps: C[16 x 16] += A[16 x 32] B[32 x 16] in bf16 pairs, 2 x 16 x 16 x 32 operations.
// Four independent accumulator tiles (C00 += A0 B0, C01 += A0 B1, C10 += A1 B0, C11 += A1 B1)
// keep the unit busy; the operands are loaded once.
__attribute__((target("amx-tile,amx-bf16"))) double amxGflopsOnce(long iterations) {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.bytesPerRow[t] = 64;
    config.rows[t] = 16;
  }
  _tile_loadconfig(&config);
  alignas(64) static unsigned short operand[16 * 32];
  alignas(64) static float result[16 * 16];
  for (unsigned short& x : operand)
    x = 0x3580; // 2^-20
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  _tile_loadd(6, operand, 64);
  _tile_loadd(7, operand, 64);
  auto start = std::chrono::steady_clock::now();
  for (long n = 0; n < iterations; ++n) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, result, 64);
  const double gflops = gflopsSince(start, 4.0 * 2 * 16 * 16 * 32 * static_cast<double>(iterations));
  _tile_release();
  volatile float keep = result[0];
  (void)keep;
  return gflops;
}

template <typename Once>
double best(Once once, long iterations) {
  double top = 0;
  for (int repetition = 0; repetition < kRepetitions; ++repetition) {
    const double g = once(iterations);
    top = g > top ? g : top;
  }
  return top;
}

void printBf16Peaks() {
  const auto& features = attnc::runtime::hostCpuFeatures();
  if (features.contains("avx512_bf16"))
    std::printf("BF16 dot-product peak (vdpbf16ps), one core: %.1f GFLOP/s\n",
                best(dotGflopsOnce, 50'000'000));
  else
    std::printf("BF16 dot-product peak (vdpbf16ps), one core: none (no AVX512-BF16)\n");
  if (!features.contains("amx_tile") || !features.contains("amx_bf16")) {
    std::printf("BF16 AMX peak (tdpbf16ps), one core: none (no AMX-BF16)\n");
    return;
  }
  if (const std::string refused = attnc::runtime::requestAmxTiles(); !refused.empty())
    std::printf("BF16 AMX peak (tdpbf16ps), one core: none (%s)\n", refused.c_str());
  else
    std::printf("BF16 AMX peak (tdpbf16ps), one core: %.1f GFLOP/s\n",
                best(amxGflopsOnce, 5'000'000));
}

} // namespace

int main(int argc, char** argv) {
  const bool bf16 = argc == 2 && std::strcmp(argv[1], "--bf16") == 0;
  if (argc > 2 || (argc == 2 && !bf16)) {
    std::fprintf(stderr, "usage: attnc-fma-peak [--bf16]\n");
    return 2;
  }
  if (bf16) {
    printBf16Peaks();
    return 0;
  }
  std::printf("FP32 FMA peak, one core: %.1f GFLOP/s\n", best(fmaGflopsOnce, 50'000'000));
  return 0;
}
