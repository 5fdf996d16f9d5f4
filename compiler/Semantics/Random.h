// The counter-based random numbers every backend reproduces bit for bit.
//
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11) maps a
// 128-bit counter and a 64-bit key to 128 random bits with no state, so a GPU thread, a SIMD
// lane and the f64 reference all draw the same number for the same (seed, coordinates).
// Streams are kept apart by tweaking the key's high word:
//   dropout:  key (seed_lo, seed_hi),          counter (j / 4, i, h, b), word j % 4
//   bigbird:  key (seed_lo, seed_hi ^ kBigBird), counter (r / 4, query block, h, 0), word r % 4
//   favor:    key (seed_lo, seed_hi ^ kFavor),   counter (n, 0, 0, 0), all four words
//   score_mod and mask_mod: key (seed_lo, seed_hi ^ kExpression), the counter and word their
//             philox(c0, c1, c2, c3, word) calls give
// Tools drawing random inputs use their own stream tag and put the tensor's index in the
// counter (GaussianStream's lane), so no two tensors share numbers.
#ifndef ATTNC_COMPILER_SEMANTICS_RANDOM_H
#define ATTNC_COMPILER_SEMANTICS_RANDOM_H

#include <array>
#include <cmath>
#include <cstdint>
#include <utility>

namespace attnc::random {

using Block = std::array<uint32_t, 4>;

inline constexpr uint32_t kDropoutStream = 0;
inline constexpr uint32_t kBigBirdStream = 0xB16B1D5Eu;
inline constexpr uint32_t kFavorStream = 0xFA7012AEu;
inline constexpr uint32_t kExpressionStream = 0xE8A12E55u;

inline constexpr uint32_t kPhiloxMul0 = 0xD2511F53u, kPhiloxMul1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxWeyl0 = 0x9E3779B9u, kPhiloxWeyl1 = 0xBB67AE85u;

// The ten Philox rounds over any 32-bit unsigned word type U (uint32_t here; Halide Exprs and
// MLIR values in the code generators). The key is known where the rounds are built, so its
// schedule runs on uint32_t. mulHiLo(m, x) returns the high and low words of the 64-bit
// product m * x; mix(hi, x, key) returns hi ^ x ^ key.
template <class U, class MulHiLo, class Mix>
constexpr std::array<U, 4> philoxRounds(std::array<U, 4> c, uint32_t key0, uint32_t key1,
                                        MulHiLo mulHiLo, Mix mix) {
  for (int round = 0; round < 10; ++round) {
    auto [hi0, lo0] = mulHiLo(kPhiloxMul0, c[0]);
    auto [hi1, lo1] = mulHiLo(kPhiloxMul1, c[2]);
    c = {mix(hi1, c[1], key0), lo1, mix(hi0, c[3], key1), lo0};
    key0 += kPhiloxWeyl0;
    key1 += kPhiloxWeyl1;
  }
  return c;
}

// The key of stream `stream` under `seed`, (seed_lo, seed_hi ^ stream), as key0 | key1 << 32.
constexpr uint64_t streamKey(uint64_t seed, uint32_t stream) {
  return seed ^ (uint64_t{stream} << 32);
}

constexpr Block philox4x32(Block counter, uint32_t key0, uint32_t key1) {
  return philoxRounds<uint32_t>(
      counter, key0, key1,
      [](uint32_t m, uint32_t x) {
        uint64_t p = uint64_t{m} * x;
        return std::pair<uint32_t, uint32_t>{static_cast<uint32_t>(p >> 32),
                                             static_cast<uint32_t>(p)};
      },
      [](uint32_t hi, uint32_t x, uint32_t key) { return hi ^ x ^ key; });
}

// Dropout keeps an element when its 32-bit draw is at least this threshold, floor(p * 2^32):
// an integer comparison, so no backend's float rounding can change the mask.
inline uint32_t dropoutThreshold(double p) {
  double t = std::floor(std::ldexp(p, 32));
  return t >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<uint32_t>(t);
}

inline bool dropoutKeeps(uint64_t seed, uint32_t threshold, int64_t b, int64_t h, int64_t i,
                         int64_t j) {
  const uint64_t key = streamKey(seed, kDropoutStream);
  Block r = philox4x32({static_cast<uint32_t>(j >> 2), static_cast<uint32_t>(i),
                        static_cast<uint32_t>(h), static_cast<uint32_t>(b)},
                       static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32));
  return r[j & 3] >= threshold;
}

// The r-th random key block of query block qb in head h, among numKeyBlocks.
inline int64_t bigbirdRandomBlock(uint64_t seed, int64_t h, int64_t qb, int64_t r,
                                  int64_t numKeyBlocks) {
  const uint64_t key = streamKey(seed, kBigBirdStream);
  Block x = philox4x32(
      {static_cast<uint32_t>(r >> 2), static_cast<uint32_t>(qb), static_cast<uint32_t>(h), 0u},
      static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32));
  return static_cast<int64_t>(x[r & 3] % static_cast<uint64_t>(numKeyBlocks));
}

// Standard normal numbers: Box-Muller on the words of successive Philox blocks at counters
// (n, lane, 0, 0), n = 0, 1, ...
class GaussianStream {
public:
  GaussianStream(uint64_t seed, uint32_t stream, uint32_t lane = 0)
      : key0_(static_cast<uint32_t>(streamKey(seed, stream))),
        key1_(static_cast<uint32_t>(streamKey(seed, stream) >> 32)),
        lane_(lane) {}

  double next() {
    if (cached_ == 4) {
      Block r = philox4x32({counter_++, lane_, 0, 0}, key0_, key1_);
      for (int pair = 0; pair < 2; ++pair) {
        double u1 = (r[2 * pair] + 0.5) * 0x1p-32; // in (0, 1): log is finite
        double u2 = r[2 * pair + 1] * 0x1p-32;
        double radius = std::sqrt(-2.0 * std::log(u1));
        values_[2 * pair] = radius * std::cos(2 * M_PI * u2);
        values_[2 * pair + 1] = radius * std::sin(2 * M_PI * u2);
      }
      cached_ = 0;
    }
    return values_[cached_++];
  }

private:
  uint32_t key0_, key1_, lane_;
  uint32_t counter_ = 0;
  std::array<double, 4> values_{};
  int cached_ = 4;
};

} // namespace attnc::random

#endif // ATTNC_COMPILER_SEMANTICS_RANDOM_H
