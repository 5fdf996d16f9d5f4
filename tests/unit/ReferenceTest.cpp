// The f64 reference against hand-computed values and the identities of softmax attention.
#include "TestSupport.h"

#include "Semantics/Positions.h"
#include "attnc/Float8.hpp"

#include <cmath>
#include <gtest/gtest.h>
#include <limits>

namespace attnc {
namespace {

using test::at4;
using test::randomCall;
using test::runReferenceOn;

// One query, two keys, d = 1: scores are q.k / sqrt(1), so the weights are softmax(1, 3).
// The row of the hand-computed cases: q = 1, keys 1 and 3, values 10 and 20, so the scores are
// 1 and 3 (plus what the spec's score_mod adds).
test::Outputs oneRowOfScoresOneAndThree(const std::string& spec) {
  tools::Call call = randomCall(spec, 1, 1, 2);
  call.tensor("q").assign({1.0});
  call.tensor("k").assign({1.0, 3.0});
  call.tensor("v").assign({10.0, 20.0});
  return runReferenceOn(call);
}

// softmax(1, 3) and its mean of (10, 20), lse shifted by `shift` within `lseTolerance`.
void expectSoftmaxOfOneAndThree(const test::Outputs& out, double shift, double lseTolerance) {
  double p0 = 1 / (1 + std::exp(2.0)), p1 = 1 - p0;
  EXPECT_NEAR(out.weights[0], p0, 1e-15);
  EXPECT_NEAR(out.weights[1], p1, 1e-15);
  EXPECT_NEAR(out.o[0], 10 * p0 + 20 * p1, 1e-13);
  EXPECT_NEAR(out.lse[0], shift + std::log(std::exp(1.0) + std::exp(3.0)), lseTolerance);
}

TEST(Reference, HandComputedSoftmax) {
  expectSoftmaxOfOneAndThree(oneRowOfScoresOneAndThree("d_k=1 lse=true weights=true"), 0, 1e-14);
}

// The same row with a sink logit of 2: softmax over (1, 3, 2) with the sink's share dropped, so
// the weights sum to less than one and lse counts the sink.
TEST(Reference, HandComputedSink) {
  tools::Call call = randomCall("d_k=1 lse=true weights=true sinks=true", 1, 1, 2);
  call.tensor("q").assign({1.0});
  call.tensor("k").assign({1.0, 3.0});
  call.tensor("v").assign({10.0, 20.0});
  call.tensor("sinks").assign({2.0});
  test::Outputs out = runReferenceOn(call);
  const double denominator = std::exp(1.0) + std::exp(3.0) + std::exp(2.0);
  const double p0 = std::exp(1.0) / denominator, p1 = std::exp(3.0) / denominator;
  EXPECT_NEAR(out.weights[0], p0, 1e-15);
  EXPECT_NEAR(out.weights[1], p1, 1e-15);
  EXPECT_NEAR(out.o[0], 10 * p0 + 20 * p1, 1e-13);
  EXPECT_NEAR(out.lse[0], std::log(denominator), 1e-14);
}

// Softmax ignores a constant shift, however large: the row of HandComputedSoftmax shifted by
// -2^52, where a double still holds the scores 1 and 3 apart, gives the same weights and o, and
// an lse shifted by the same amount (within its one ulp there). m + log L rounds to m at that
// size, so weights formed as exp(s - lse) would be e^-2 and 1, summing past one.
TEST(Reference, HandComputedSoftmaxShiftedByTwoToThe52) {
  expectSoftmaxOfOneAndThree(
      oneRowOfScoresOneAndThree(
          "d_k=1 lse=true weights=true score_mod=\"score - 4503599627370496.0\""),
      -4503599627370496.0, 1.0);
}

// Three equal scores shifted by -1e20 (a double's ulp there is 2^14): weights 1/3 each, o the
// mean of v, lse -1e20 + log 3, which rounds to -1e20 (the literal's f32, as kernels hold it).
TEST(Reference, HandComputedEqualScoresShiftedBy1e20) {
  tools::Call call =
      randomCall("d_k=1 lse=true weights=true score_mod=\"score - 1e20\"", 1, 1, 3);
  call.tensor("q").assign({1.0});
  call.tensor("k").assign({2.0, 2.0, 2.0});
  call.tensor("v").assign({10.0, 20.0, 60.0});
  test::Outputs out = runReferenceOn(call);
  for (int j = 0; j < 3; ++j)
    EXPECT_NEAR(out.weights[j], 1.0 / 3, 1e-15);
  EXPECT_NEAR(out.o[0], 30.0, 1e-13);
  EXPECT_EQ(out.lse[0], -static_cast<double>(1e20f));
}

// A mask written as a score of -1e30 (the where(kv_idx <= qpos, score, -1e30)) is no
// mask: Tq 3, Tk 2, bottom-right, so row i sits at qpos = i - 1. Row 0 scores both keys -1e30
// and takes their mean with lse -1e30 + log 2 (rounding to -1e30); row 1 keeps key 0 whole;
// row 2 is the plain softmax of its two scores.
TEST(Reference, HandComputedRowsWhoseEveryKeyScoresMinus1e30) {
  tools::Call call = randomCall(
      "d_k=1 lse=true weights=true score_mod=\"where(kv_idx <= qpos, score, -1e30)\"", 1, 3, 2);
  call.tensor("q").assign({1.0, 1.0, 1.0});
  call.tensor("k").assign({1.0, 3.0});
  call.tensor("v").assign({10.0, 20.0});
  test::Outputs out = runReferenceOn(call);
  const double p0 = 1 / (1 + std::exp(2.0)), p1 = 1 - p0;
  const double weights[3][2] = {{0.5, 0.5}, {1.0, 0.0}, {p0, p1}};
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 2; ++j)
      EXPECT_NEAR(out.weights[i * 2 + j], weights[i][j], 1e-15) << "row " << i << " key " << j;
    EXPECT_NEAR(out.o[i], 10 * weights[i][0] + 20 * weights[i][1], 1e-13) << "row " << i;
  }
  EXPECT_EQ(out.lse[0], -static_cast<double>(1e30f));
  EXPECT_NEAR(out.lse[1], 1.0, 1e-15);
  EXPECT_NEAR(out.lse[2], std::log(std::exp(1.0) + std::exp(3.0)), 1e-14);
}

// A row with no kept key and a sink: o = 0 (the sink has no value) and lse = the sink.
TEST(Reference, FullyMaskedRowWithSinkHasTheSinkAsLse) {
  tools::Call call = randomCall("heads=2 d_k=4 mask=padding lse=true sinks=true", 1, 2, 3);
  call.tensor("lengths").assign({0});
  call.tensor("sinks").assign({-1.5, 4.0});
  test::Outputs out = runReferenceOn(call);
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(out.lse[h * 2 + i], h == 0 ? -1.5 : 4.0);
      for (int e = 0; e < 4; ++e)
        EXPECT_EQ(out.o[at4(2, 2, 4, 0, h, i, e)], 0.0);
    }
}

// The sizes of a call with a contiguous bhsd cache: q [B, H, Tq, d], k and v [B, H_kv, Tk, d].
struct CacheSizes {
  int64_t H, Hkv, Tq, Tk, d;
};

// Sequence b of such a call, given its q, k and v values, computed on its own: the plain spec
// `features` on its Tq query rows and its first n keys.
test::Outputs sequenceAlone(const std::string& features, const CacheSizes& z,
                            const std::vector<double>& q, const std::vector<double>& k,
                            const std::vector<double>& v, int64_t b, int64_t n) {
  tools::Call alone = randomCall(features, 1, z.Tq, n);
  const int64_t rows = z.H * z.Tq * z.d;
  std::vector<double> qb(q.begin() + b * rows, q.begin() + (b + 1) * rows);
  std::vector<double> kb(z.Hkv * n * z.d), vb(kb.size());
  for (int64_t g = 0; g < z.Hkv; ++g)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t e = 0; e < z.d; ++e) {
        kb[at4(z.Hkv, n, z.d, 0, g, j, e)] = k[at4(z.Hkv, z.Tk, z.d, b, g, j, e)];
        vb[at4(z.Hkv, n, z.d, 0, g, j, e)] = v[at4(z.Hkv, z.Tk, z.d, b, g, j, e)];
      }
  alone.tensor("q").assign(qb);
  alone.tensor("k").assign(kb);
  alone.tensor("v").assign(vb);
  return runReferenceOn(alone);
}

// A KV cache, contiguous or paged, computes for each sequence b the attention of its last Tq
// positions over its own seq_lens[b] keys: the plain spec on those keys alone (Tk = seq_lens[b]),
// causal aligned to the sequence's end, with the sliding window and ALiBi at its positions. A
// sequence shorter than Tq has rows before its start, which see nothing under causal.
TEST(Reference, KvCachesAttendEachSequenceOverItsOwnKeys) {
  const std::string features = "heads=4 kv_heads=2 d_k=8 mask=causal+window window_left=5 "
                               "alibi=true lse=true";
  const int64_t B = 3, Tq = 3, Tk = 20, page = 4, H = 4, Hkv = 2, d = 8;
  const std::vector<double> lengths = {13, 20, 2};
  tools::Call contiguous =
      randomCall(features + " kv_cache=contiguous", B, Tq, Tk, /*seed=*/3);
  contiguous.tensor("seq_lens").assign(lengths);
  tools::Call paged = randomCall(features + " kv_cache=paged page_size=4", B, Tq, Tk, 3);
  paged.tensor("seq_lens").assign(lengths);
  // The contiguous cache's rows spread over the pages in the paged call's shuffled order.
  const std::vector<double> table = paged.tensor("block_table").values();
  paged.tensor("q").assign(contiguous.tensor("q").values());
  for (const char* name : {"k", "v"}) {
    const std::vector<double> rows = contiguous.tensor(name).values();
    std::vector<double> pages = paged.tensor(std::string(name) + "_pages").values();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t g = 0; g < Hkv; ++g)
        for (int64_t j = 0; j < Tk; ++j) {
          const auto p = static_cast<int64_t>(table[b * (Tk / page) + j / page]);
          for (int64_t e = 0; e < d; ++e)
            pages[((p * page + j % page) * Hkv + g) * d + e] = rows[at4(Hkv, Tk, d, b, g, j, e)];
        }
    paged.tensor(std::string(name) + "_pages").assign(pages);
  }
  const test::Outputs fromContiguous = runReferenceOn(contiguous), fromPages = runReferenceOn(paged);
  EXPECT_EQ(fromContiguous.o, fromPages.o);
  EXPECT_EQ(fromContiguous.lse, fromPages.lse);

  for (int64_t b = 0; b < B; ++b) {
    const test::Outputs expected =
        sequenceAlone(features, {H, Hkv, Tq, Tk, d}, contiguous.tensor("q").values(),
                      contiguous.tensor("k").values(), contiguous.tensor("v").values(), b,
                      static_cast<int64_t>(lengths[b]));
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Tq; ++i) {
        const double lse = fromContiguous.lse[(b * H + h) * Tq + i], want = expected.lse[h * Tq + i];
        if (std::isinf(want))
          EXPECT_EQ(lse, want) << "b=" << b << " h=" << h << " i=" << i;
        else
          EXPECT_NEAR(lse, want, 1e-12) << "b=" << b << " h=" << h << " i=" << i;
        for (int64_t e = 0; e < d; ++e)
          EXPECT_NEAR(fromContiguous.o[at4(H, Tq, d, b, h, i, e)], expected.o[at4(H, Tq, d, 0, h, i, e)],
                      1e-12);
      }
  }
  // Sequence 2 holds 2 keys: its first query row sits at position -1 and keeps none.
  EXPECT_EQ(fromContiguous.lse[(2 * H) * Tq], -std::numeric_limits<double>::infinity());
}

// A ragged batch (ragged_q) computes each sequence b on its own: rows [cu[b], cu[b+1]) of the
// packed q, o and lse [H, total_q], against batch entry b of the cache, with its own Tq; a
// sequence of no rows writes nothing. Sequences of 5, 0, 2, 2 and 3 rows (the two of 2 run as one
// batch), the second of 2 rows over 1 key (its first row sees none).
TEST(Reference, RaggedBatchesComputeEachSequenceOnItsOwn) {
  const std::string features = "heads=4 kv_heads=2 d_k=8 mask=causal+window window_left=5 "
                               "alibi=true lse=true layout=bshd kv_cache=contiguous";
  const int64_t B = 5, Tq = 5, Tk = 12, H = 4, Hkv = 2, d = 8;
  tools::Call ragged = randomCall(features + " ragged_q=true", B, Tq, Tk, /*seed=*/12);
  const std::vector<double> cu = {0, 5, 5, 7, 9, 12}, lengths = {12, 7, 3, 1, 9};
  ASSERT_EQ(ragged.tensor("cu_seqlens_q").values().back(), cu.back()); // q's rows, as drawn
  ragged.tensor("cu_seqlens_q").assign(cu);
  ragged.tensor("seq_lens").assign(lengths);
  const test::Outputs out = runReferenceOn(ragged);
  const int64_t rows = static_cast<int64_t>(cu.back());
  const std::vector<double> q = ragged.tensor("q").values(), k = ragged.tensor("k").values(),
                            v = ragged.tensor("v").values();
  for (int64_t b = 0; b < B; ++b) {
    const auto first = static_cast<int64_t>(cu[b]), n = static_cast<int64_t>(cu[b + 1]) - first;
    if (n == 0)
      continue;
    tools::Call alone = randomCall(features, 1, n, Tk);
    alone.tensor("q").assign({q.begin() + first * H * d, q.begin() + (first + n) * H * d});
    alone.tensor("k").assign({k.begin() + b * Tk * Hkv * d, k.begin() + (b + 1) * Tk * Hkv * d});
    alone.tensor("v").assign({v.begin() + b * Tk * Hkv * d, v.begin() + (b + 1) * Tk * Hkv * d});
    alone.tensor("seq_lens").assign({lengths[b]});
    const test::Outputs expected = runReferenceOn(alone);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t h = 0; h < H; ++h) {
        EXPECT_EQ(out.lse[h * rows + first + i], expected.lse[h * n + i])
            << "b=" << b << " h=" << h << " i=" << i;
        for (int64_t e = 0; e < d; ++e)
          EXPECT_EQ(out.o[((first + i) * H + h) * d + e], expected.o[(i * H + h) * d + e]);
      }
  }
}

// RoPE over a KV cache rotates only the queries, at their positions at the end of each
// sequence; the cache holds its keys rotated at their own positions already. So a cache of
// rotated keys gives what the plain spec gives on the sequence's unrotated keys alone.
TEST(Reference, RopeOverACacheRotatesTheQueriesAtTheSequencesEnd) {
  const std::string features = "heads=2 d_k=8 rope=true rope_dims=6 mask=causal lse=true";
  const int64_t B = 2, Tq = 3, Tk = 10, H = 2, d = 8;
  const std::vector<double> lengths = {10, 4};
  tools::Call cached = randomCall(features + " kv_cache=contiguous", B, Tq, Tk, /*seed=*/5);
  cached.tensor("seq_lens").assign(lengths);
  const std::vector<double> q = cached.tensor("q").values(), k = cached.tensor("k").values(),
                            v = cached.tensor("v").values();
  std::vector<double> rotated = k;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t j = 0; j < Tk; ++j)
        positions::applyRope(&rotated[at4(H, Tk, d, b, h, j, 0)], j, 6, 10000, RopeStyle::Half);
  cached.tensor("k").assign(rotated);
  const test::Outputs out = runReferenceOn(cached);
  for (int64_t b = 0; b < B; ++b) {
    const test::Outputs expected = sequenceAlone(features, {H, H, Tq, Tk, d}, q, k, v, b,
                                                 static_cast<int64_t>(lengths[b]));
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Tq; ++i) {
        // The cache's keys were rounded to f32 after rotating.
        EXPECT_NEAR(out.lse[(b * H + h) * Tq + i], expected.lse[h * Tq + i], 1e-5);
        for (int64_t e = 0; e < d; ++e)
          EXPECT_NEAR(out.o[at4(H, Tq, d, b, h, i, e)], expected.o[at4(H, Tq, d, 0, h, i, e)],
                      1e-5);
      }
  }
}

// A quantized cache is its rows (int8 values, or E4M3 bytes decoded) times their scales: the
// same spec on a float cache holding those products gives the same outputs, for contiguous bshd
// scales [B, Tk, H_kv].
TEST(Reference, QuantizedCachesAreTheirRowsTimesTheirScales) {
  const std::string features = "heads=2 kv_heads=2 d_k=4 mask=causal layout=bshd lse=true "
                               "kv_cache=contiguous";
  for (const std::string dtype : {"int8", "fp8_e4m3"}) {
    SCOPED_TRACE(dtype);
    tools::Call quantised = randomCall(features + " kv_dtype=" + dtype, 1, 2, 5, 4);
    tools::Call plain = randomCall(features, 1, 2, 5, 4);
    quantised.tensor("seq_lens").assign({4});
    plain.tensor("seq_lens").assign({4});
    plain.tensor("q").assign(quantised.tensor("q").values());
    for (const char* name : {"k", "v"}) {
      std::vector<double> rows = quantised.tensor(name).values();
      const std::vector<double> scale = quantised.tensor(std::string(name) + "_scale").values();
      for (size_t e = 0; e < rows.size(); ++e) {
        const double value =
            dtype == "int8" ? rows[e] : e4m3ToDouble(static_cast<uint8_t>(rows[e]));
        rows[e] = value * scale[e / 4]; // [B, Tk, H_kv, d]: one scale per d elements
      }
      plain.tensor(name).assign(rows);
    }
    const test::Outputs a = runReferenceOn(quantised), b = runReferenceOn(plain);
    for (size_t e = 0; e < a.o.size(); ++e)
      EXPECT_NEAR(a.o[e], b.o[e], 1e-6); // the plain cache holds the products rounded to f32
    for (size_t e = 0; e < a.lse.size(); ++e)
      EXPECT_NEAR(a.lse[e], b.lse[e], 1e-6);
  }
}

TEST(Reference, HandComputedCausalBottomRight) {
  // Tq = 1, Tk = 3, bottom-right: the query sits at position 2 and sees every key.
  tools::Call call = randomCall("d_k=1 mask=causal weights=true", 1, 1, 3);
  call.tensor("q").assign({0.0});
  test::Outputs out = runReferenceOn(call);
  for (int j = 0; j < 3; ++j)
    EXPECT_NEAR(out.weights[j], 1.0 / 3, 1e-15);
  // Top-left: it sits at position 0 and sees key 0 only.
  tools::Call left = randomCall("d_k=1 mask=causal causal_align=top_left weights=true", 1, 1, 3);
  test::Outputs outLeft = runReferenceOn(left);
  EXPECT_EQ(outLeft.weights[0], 1.0);
  EXPECT_EQ(outLeft.weights[1], 0.0);
}

// Special values as in PyTorch's math path, for the keys a row keeps: NaN in q row i makes row i
// NaN; NaN in k row j every row keeping j; NaN in v row j the rows keeping j, and no other (a
// masked key is absent); a score past f32's range is infinite, as in every f32 kernel, and
// softmax's inf - inf makes its row NaN.
TEST(Reference, SpecialValuesReachTheRowsThatUseThem) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto rowIsNaN = [](const std::vector<double>& o, int row) {
    return std::isnan(o[row * 2]) && std::isnan(o[row * 2 + 1]);
  };
  auto rowIsFinite = [](const std::vector<double>& o, int row) {
    return std::isfinite(o[row * 2]) && std::isfinite(o[row * 2 + 1]);
  };
  tools::Call qNaN = randomCall("d_k=2 lse=true", 1, 3, 3);
  std::vector<double> q = qNaN.tensor("q").values();
  q[1 * 2] = nan;
  qNaN.tensor("q").assign(q);
  test::Outputs out = runReferenceOn(qNaN);
  EXPECT_TRUE(rowIsFinite(out.o, 0) && rowIsNaN(out.o, 1) && rowIsFinite(out.o, 2));
  EXPECT_TRUE(std::isnan(out.lse[1]) && std::isfinite(out.lse[0]));

  tools::Call kNaN = randomCall("d_k=2 mask=causal causal_align=top_left", 1, 3, 3);
  std::vector<double> k = kNaN.tensor("k").values();
  k[1 * 2 + 1] = nan; // rows 1 and 2 keep key 1
  kNaN.tensor("k").assign(k);
  out = runReferenceOn(kNaN);
  EXPECT_TRUE(rowIsFinite(out.o, 0) && rowIsNaN(out.o, 1) && rowIsNaN(out.o, 2));

  tools::Call vNaN = randomCall("d_k=2 mask=causal causal_align=top_left", 1, 3, 3);
  std::vector<double> v = vNaN.tensor("v").values();
  v[2 * 2] = nan; // only row 2 keeps key 2
  vNaN.tensor("v").assign(v);
  out = runReferenceOn(vNaN);
  EXPECT_TRUE(rowIsFinite(out.o, 0) && rowIsFinite(out.o, 1));
  EXPECT_TRUE(std::isnan(out.o[2 * 2]) && std::isfinite(out.o[2 * 2 + 1]));

  tools::Call huge = randomCall("d_k=1", 1, 2, 2);
  huge.tensor("q").assign({1e30, 1.0});
  huge.tensor("k").assign({1e30, 1.0});
  out = runReferenceOn(huge);
  EXPECT_TRUE(std::isnan(out.o[0])) << "1e60 overflows f32: +inf, and inf - inf is NaN";
  EXPECT_TRUE(std::isfinite(out.o[1])) << "row 1's scores are 1e30 and 1";
}

TEST(Reference, WeightRowsSumToOne) {
  for (const char* spec : {"heads=3 d_k=5 weights=true", "heads=2 d_k=4 mask=causal weights=true",
                           "variant=additive heads=2 d_q=3 d_k=5 d_attn=4 weights=true",
                           "variant=linear heads=2 d_k=4 feature_map=elu1 weights=true"}) {
    tools::Call call = randomCall(spec, 2, 7, 11);
    test::Outputs out = runReferenceOn(call);
    int64_t rows = out.weights.size() / 11;
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0;
      for (int j = 0; j < 11; ++j)
        sum += out.weights[r * 11 + j];
      EXPECT_NEAR(sum, 1.0, 1e-12) << spec << " row " << r;
    }
  }
}

// o equals the weights times V, and lse equals log sum exp of the scores.
TEST(Reference, OutputIsWeightsTimesValues) {
  tools::Call call =
      randomCall("heads=2 kv_heads=1 d_k=6 d_v=3 mask=causal weights=true lse=true", 2, 5, 9);
  test::Outputs out = runReferenceOn(call);
  std::vector<double> v = call.tensor("v").values();
  for (int b = 0; b < 2; ++b)
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 5; ++i)
        for (int e = 0; e < 3; ++e) {
          double expect = 0;
          for (int j = 0; j < 9; ++j)
            expect += out.weights[at4(2, 5, 9, b, h, i, j)] * v[at4(1, 9, 3, b, 0, j, e)];
          EXPECT_NEAR(out.o[at4(2, 5, 3, b, h, i, e)], expect, 1e-12);
        }
}

TEST(Reference, GqaEqualsRepeatedKeyValueHeads) {
  const int B = 2, H = 6, G = 2, T = 7, S = 10, D = 4;
  tools::Call gqa = randomCall("heads=6 kv_heads=2 d_k=4 mask=causal lse=true", B, T, S);
  tools::Call mha = randomCall("heads=6 d_k=4 mask=causal lse=true", B, T, S);
  mha.tensor("q").assign(gqa.tensor("q").values());
  std::vector<double> k = gqa.tensor("k").values(), v = gqa.tensor("v").values();
  std::vector<double> kRep(B * H * S * D), vRep(B * H * S * D);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int j = 0; j < S; ++j)
        for (int d = 0; d < D; ++d) {
          kRep[at4(H, S, D, b, h, j, d)] = k[at4(G, S, D, b, h / 3, j, d)];
          vRep[at4(H, S, D, b, h, j, d)] = v[at4(G, S, D, b, h / 3, j, d)];
        }
  mha.tensor("k").assign(kRep);
  mha.tensor("v").assign(vRep);
  test::Outputs a = runReferenceOn(gqa), b = runReferenceOn(mha);
  for (size_t i = 0; i < a.o.size(); ++i)
    EXPECT_NEAR(a.o[i], b.o[i], 1e-13);
  for (size_t i = 0; i < a.lse.size(); ++i)
    EXPECT_NEAR(a.lse[i], b.lse[i], 1e-13);
}

TEST(Reference, FullyMaskedRowsGiveZerosAndMinusInfinity) {
  tools::Call call = randomCall("heads=2 d_k=4 mask=padding lse=true weights=true", 2, 3, 5);
  call.tensor("lengths").assign({0, 2});
  test::Outputs out = runReferenceOn(call);
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(out.lse[(0 * 2 + h) * 3 + i], -std::numeric_limits<double>::infinity());
      for (int e = 0; e < 4; ++e)
        EXPECT_EQ(out.o[at4(2, 3, 4, 0, h, i, e)], 0.0);
      EXPECT_TRUE(std::isfinite(out.lse[(1 * 2 + h) * 3 + i]));
      for (int j = 2; j < 5; ++j) // keys past the length get no weight
        EXPECT_EQ(out.weights[at4(2, 3, 5, 1, h, i, j)], 0.0);
    }
  for (double x : out.o)
    EXPECT_FALSE(std::isnan(x));
}

TEST(Reference, RandomInputsDifferPerTensor) {
  tools::Call call = randomCall("heads=2 d_k=4 bias=true", 1, 4, 4);
  std::vector<double> q = call.tensor("q").values(), k = call.tensor("k").values(),
                      v = call.tensor("v").values();
  EXPECT_NE(q, k);
  EXPECT_NE(k, v);
  EXPECT_NE(q, v);
  std::vector<double> bias = call.tensor("bias").values(); // [1, 2, 4, 4]: as many as q
  EXPECT_NE(q, bias);
  EXPECT_NE(q, randomCall("heads=2 d_k=4 bias=true", 1, 4, 4, /*seed=*/2).tensor("q").values());
}

TEST(Reference, LinformerWithNoValidKeyIsFullyMasked) {
  tools::Call call =
      randomCall("variant=linformer d_k=4 proj_len=3 mask=padding lse=true", 2, 2, 5);
  call.tensor("lengths").assign({0, 5});
  test::Outputs out = runReferenceOn(call);
  EXPECT_EQ(out.lse[0], -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isfinite(out.lse[2]));
  for (int e = 0; e < 8; ++e)
    EXPECT_EQ(out.o[e], 0.0);
}

TEST(Reference, BshdLayoutEqualsBhsd) {
  tools::Call bhsd = randomCall("heads=3 d_k=4 mask=causal", 2, 5, 6);
  tools::Call bshd = randomCall("heads=3 d_k=4 mask=causal layout=bshd", 2, 5, 6);
  auto toBshd = [](const std::vector<double>& x, int H, int T, int D) {
    std::vector<double> y(x.size());
    for (int b = 0; b < 2; ++b)
      for (int h = 0; h < H; ++h)
        for (int t = 0; t < T; ++t)
          for (int d = 0; d < D; ++d)
            y[at4(T, H, D, b, t, h, d)] = x[at4(H, T, D, b, h, t, d)];
    return y;
  };
  bshd.tensor("q").assign(toBshd(bhsd.tensor("q").values(), 3, 5, 4));
  bshd.tensor("k").assign(toBshd(bhsd.tensor("k").values(), 3, 6, 4));
  bshd.tensor("v").assign(toBshd(bhsd.tensor("v").values(), 3, 6, 4));
  test::Outputs a = runReferenceOn(bhsd), b = runReferenceOn(bshd);
  std::vector<double> expected = toBshd(a.o, 3, 5, 4);
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(b.o[i], expected[i], 1e-15);
}

TEST(Reference, SoftcapAndScaleAndBias) {
  tools::Call call = randomCall("d_k=1 scale=2 softcap=1.5 bias=true weights=true", 1, 1, 2);
  call.tensor("q").assign({1.0});
  call.tensor("k").assign({1.0, -2.0});
  call.tensor("bias").assign({0.25, -0.5});
  test::Outputs out = runReferenceOn(call);
  double s0 = 1.5 * std::tanh(2.0 / 1.5) + 0.25, s1 = 1.5 * std::tanh(-4.0 / 1.5) - 0.5;
  EXPECT_NEAR(out.weights[0], 1 / (1 + std::exp(s1 - s0)), 1e-15);
}

TEST(Reference, DropoutIsDeterministicAndScalesKeptWeights) {
  const char* spec = "heads=2 d_k=4 dropout=0.5 seed=42 weights=true";
  tools::Call a = randomCall(spec, 1, 16, 16), b = randomCall(spec, 1, 16, 16);
  test::Outputs x = runReferenceOn(a), y = runReferenceOn(b);
  EXPECT_EQ(x.o, y.o);
  // o = sum_j keep_ij p_ij / (1 - p) v_j: every o lies in the span of kept keys, and about half
  // of the weight mass is dropped, so o differs from the no-dropout output.
  tools::Call plain = randomCall("heads=2 d_k=4 weights=true", 1, 16, 16);
  test::Outputs z = runReferenceOn(plain);
  EXPECT_EQ(x.weights, z.weights); // weights are reported before dropout
  double diff = 0;
  for (size_t i = 0; i < x.o.size(); ++i)
    diff += std::fabs(x.o[i] - z.o[i]);
  EXPECT_GT(diff, 1.0);
}

} // namespace
} // namespace attnc
