// The variants against sdpa identities and direct formulas, and the position modifiers.
#include "Semantics/Favor.h"
#include "Semantics/Positions.h"
#include "TestSupport.h"

#include <cmath>
#include <gtest/gtest.h>

namespace attnc {
namespace {

using test::at4;
using test::randomCall;
using test::runReferenceOn;

std::vector<double> identityStack(int64_t groups, int64_t rows, int64_t cols) {
  std::vector<double> w(groups * rows * cols, 0);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t r = 0; r < std::min(rows, cols); ++r)
      w[(g * rows + r) * cols + r] = 1;
  return w;
}

TEST(ReferenceVariants, MhaWithIdentityProjectionsEqualsSdpa) {
  const int B = 2, H = 3, T = 5, S = 7, D = 4, M = H * D;
  tools::Call sdpa = randomCall("heads=3 d_k=4 mask=causal", B, T, S);
  tools::Call mha = randomCall("variant=mha heads=3 d_k=4 mask=causal", B, T, S);
  // x[b, t, h * D + e] = q[b, h, t, e]
  auto merge = [&](const std::vector<double>& x, int len) {
    std::vector<double> y(B * len * M);
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h)
        for (int t = 0; t < len; ++t)
          for (int e = 0; e < D; ++e)
            y[(b * len + t) * M + h * D + e] = x[at4(H, len, D, b, h, t, e)];
    return y;
  };
  mha.tensor("q").assign(merge(sdpa.tensor("q").values(), T));
  mha.tensor("k").assign(merge(sdpa.tensor("k").values(), S));
  mha.tensor("v").assign(merge(sdpa.tensor("v").values(), S));
  for (const char* w : {"w_q", "w_k", "w_v", "w_o"})
    mha.tensor(w).assign(identityStack(1, M, M));
  std::vector<double> expected = merge(runReferenceOn(sdpa).o, T);
  std::vector<double> got = runReferenceOn(mha).o;
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(got[i], expected[i], 1e-13);
}

TEST(ReferenceVariants, MhaPositionalEncodingIsAddedToTheInputs) {
  const int T = 4, M = 8;
  tools::Call withPe = randomCall("variant=mha heads=2 d_k=4 pe=sinusoidal", 1, T, T);
  tools::Call plain = randomCall("variant=mha heads=2 d_k=4", 1, T, T);
  for (const char* name : {"q", "k", "v"}) {
    std::vector<double> x = withPe.tensor(name).values();
    for (int t = 0; t < T; ++t)
      for (int m = 0; m < M; ++m)
        x[t * M + m] += positions::sinusoidal(t, m, M);
    plain.tensor(name).assign(x);
  }
  for (const char* w : {"w_q", "w_k", "w_v", "w_o"})
    plain.tensor(w).assign(withPe.tensor(w).values());
  std::vector<double> a = runReferenceOn(withPe).o, b = runReferenceOn(plain).o;
  for (size_t i = 0; i < a.size(); ++i) // `plain` stores x + PE rounded to f32
    EXPECT_NEAR(a[i], b[i], 1e-6);
}

TEST(ReferenceVariants, LinformerWithIdentityProjectionsEqualsSdpa) {
  tools::Call sdpa = randomCall("heads=4 kv_heads=2 d_k=3 lse=true", 2, 6, 5);
  tools::Call lin =
      randomCall("variant=linformer heads=4 kv_heads=2 d_k=3 proj_len=5 lse=true", 2, 6, 5);
  for (const char* name : {"q", "k", "v"})
    lin.tensor(name).assign(sdpa.tensor(name).values());
  lin.tensor("e").assign(identityStack(2, 5, 5));
  lin.tensor("f").assign(identityStack(2, 5, 5));
  test::Outputs a = runReferenceOn(sdpa), b = runReferenceOn(lin);
  for (size_t i = 0; i < a.o.size(); ++i)
    EXPECT_NEAR(a.o[i], b.o[i], 1e-13);
  for (size_t i = 0; i < a.lse.size(); ++i)
    EXPECT_NEAR(a.lse[i], b.lse[i], 1e-13);
}

TEST(ReferenceVariants, BilinearWithIdentityIsLuongDot) {
  tools::Call dot = randomCall("heads=2 d_k=4 scale=1 mask=causal", 1, 5, 6);
  tools::Call bil = randomCall("variant=bilinear heads=2 d_k=4 mask=causal", 1, 5, 6);
  for (const char* name : {"q", "k", "v"})
    bil.tensor(name).assign(dot.tensor(name).values());
  bil.tensor("w").assign(identityStack(2, 4, 4));
  std::vector<double> a = runReferenceOn(dot).o, b = runReferenceOn(bil).o;
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], b[i], 1e-13);
}

TEST(ReferenceVariants, AdditiveHandComputed) {
  // d_q = d_k = d_attn = 1: score_j = v_a tanh(w1 q + w2 k_j).
  tools::Call call =
      randomCall("variant=additive d_q=1 d_k=1 d_v=1 d_attn=1 weights=true", 1, 1, 2);
  call.tensor("q").assign({0.5});
  call.tensor("k").assign({1.0, -1.0});
  call.tensor("w1").assign({2.0});
  call.tensor("w2").assign({0.75});
  call.tensor("v_a").assign({3.0});
  test::Outputs out = runReferenceOn(call);
  double s0 = 3 * std::tanh(1.0 + 0.75), s1 = 3 * std::tanh(1.0 - 0.75);
  EXPECT_NEAR(out.weights[0], 1 / (1 + std::exp(s1 - s0)), 1e-15);
}

// Linear attention by prefix sums against the quadratic formula.
TEST(ReferenceVariants, LinearAttentionMatchesTheDirectFormula) {
  for (const char* mask : {"none", "causal"}) {
    const int T = 6, S = 8, D = 3;
    tools::Call call =
        randomCall(std::string("variant=linear d_k=3 feature_map=elu1 mask=") + mask, 1, T, S);
    std::vector<double> q = call.tensor("q").values(), k = call.tensor("k").values(),
                        v = call.tensor("v").values();
    auto phi = [](double x) { return x > 0 ? x + 1 : std::exp(x); };
    std::vector<double> o = runReferenceOn(call).o;
    for (int i = 0; i < T; ++i) {
      int seen = std::string(mask) == "causal" ? std::min(S, i + (S - T) + 1) : S;
      std::vector<double> num(D, 0);
      double den = 0;
      for (int j = 0; j < seen; ++j) {
        double a = 0;
        for (int d = 0; d < D; ++d)
          a += phi(q[i * D + d]) * phi(k[j * D + d]);
        den += a;
        for (int e = 0; e < D; ++e)
          num[e] += a * v[j * D + e];
      }
      for (int e = 0; e < D; ++e)
        EXPECT_NEAR(o[i * D + e], num[e] / den, 1e-12) << mask;
    }
  }
}

// With many random features, FAVOR+ approaches softmax attention.
TEST(ReferenceVariants, FavorApproximatesSoftmax) {
  tools::Call exact = randomCall("heads=1 d_k=4", 1, 6, 6);
  tools::Call favor =
      randomCall("variant=linear d_k=4 feature_map=favor features=8192 seed=3", 1, 6, 6);
  for (const char* name : {"q", "k", "v"}) {
    std::vector<double> x = exact.tensor(name).values();
    for (double& value : x)
      value *= 0.5; // small scores keep the estimator's variance low
    exact.tensor(name).assign(x);
    favor.tensor(name).assign(x);
  }
  std::vector<double> a = runReferenceOn(exact).o, b = runReferenceOn(favor).o;
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], b[i], 0.05);
}

TEST(ReferenceVariants, FavorFeaturesAreOrthogonalWithinBlocks) {
  std::vector<double> w = favor::orthogonalFeatures(11, 8, 4);
  for (int a = 0; a < 4; ++a)
    for (int b = a + 1; b < 4; ++b) {
      double dot = 0;
      for (int d = 0; d < 4; ++d)
        dot += w[a * 4 + d] * w[b * 4 + d];
      EXPECT_NEAR(dot, 0, 1e-12);
    }
  EXPECT_EQ(w, favor::orthogonalFeatures(11, 8, 4)); // deterministic in the seed
}

TEST(Positions, AlibiSlopes) {
  std::vector<double> eight = positions::alibiSlopes(8);
  for (int h = 0; h < 8; ++h)
    EXPECT_DOUBLE_EQ(eight[h], std::exp2(-(h + 1)));
  // 12 heads: the 8 slopes of 8 heads, then slopes 1, 3, 5, 7 (0-based even) of 16 heads.
  std::vector<double> twelve = positions::alibiSlopes(12);
  ASSERT_EQ(twelve.size(), 12u);
  for (int k = 0; k < 4; ++k)
    EXPECT_DOUBLE_EQ(twelve[8 + k], std::exp2(-0.5 * (2 * k + 1)));
}

TEST(Positions, AlibiBiasInScores) {
  tools::Call call = randomCall("heads=1 d_k=1 alibi=true mask=causal weights=true", 1, 1, 3);
  call.tensor("q").assign({0.0});
  test::Outputs out = runReferenceOn(call);
  // Query at position 2, slope 1/2 (one head: 2^-8): scores -0.5 * (2 - j) ... with n = 1.
  double slope = std::exp2(-8.0);
  double z = 1 + std::exp(-slope) + std::exp(-2 * slope);
  EXPECT_NEAR(out.weights[2], 1 / z, 1e-15);
  EXPECT_NEAR(out.weights[0], std::exp(-2 * slope) / z, 1e-15);
}

// RoPE makes q.k depend on positions only through their difference.
TEST(Positions, RopeIsRelative) {
  for (RopeStyle style : {RopeStyle::Half, RopeStyle::Interleaved}) {
    auto rotatedDot = [&](int64_t m, int64_t n) {
      double q[6] = {0.3, -1.2, 0.8, 0.5, 2.0, -0.1}, k[6] = {1.1, 0.4, -0.7, 0.9, 0.2, 0.6};
      positions::applyRope(q, m, 6, 10000, style);
      positions::applyRope(k, n, 6, 10000, style);
      double dot = 0;
      for (int d = 0; d < 6; ++d)
        dot += q[d] * k[d];
      return dot;
    };
    EXPECT_NEAR(rotatedDot(7, 3), rotatedDot(14, 10), 1e-12);
    EXPECT_NEAR(rotatedDot(0, 0), rotatedDot(5, 5), 1e-12);
  }
}

TEST(Positions, Sinusoidal) {
  EXPECT_DOUBLE_EQ(positions::sinusoidal(1, 0, 8), std::sin(1.0));
  EXPECT_DOUBLE_EQ(positions::sinusoidal(1, 1, 8), std::cos(1.0));
  EXPECT_DOUBLE_EQ(positions::sinusoidal(3, 2, 8), std::sin(3.0 / std::pow(10000.0, 2.0 / 8)));
  EXPECT_DOUBLE_EQ(positions::sinusoidal(3, 5, 8), std::cos(3.0 / std::pow(10000.0, 4.0 / 8)));
}

} // namespace
} // namespace attnc
