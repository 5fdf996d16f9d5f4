// The README's expression examples, run by the f64 reference, against the same attention written
// in this test: each mask_mod against mask=tensor with the mask built here from its definition,
// the relative bias against bias=true with the bias tensor built here, and the written softcap
// against softcap=, and a random block mask drawn with philox() against Philox called here.
// Shapes are off every tile: Tq != Tk, a fully masked row, ragged documents.
#include "TestSupport.h"

#include "Semantics/Random.h"

#include <cmath>
#include <functional>
#include <gtest/gtest.h>

namespace attnc {
namespace {

using test::randomCall;
using test::runReferenceOn;
using Keep = std::function<bool(int64_t b, int64_t h, int64_t i, int64_t j)>;

constexpr int64_t kB = 2, kH = 2, kTq = 13, kTk = 19;
constexpr int64_t kOffset = kTk - kTq; // bottom-right: query i sits at key position i + kOffset
const std::string kCommon = "heads=2 d_k=4 lse=true weights=true ";

void expectSameOutputs(tools::Call& written, tools::Call& builtIn) {
  for (const char* name : {"q", "k", "v"})
    builtIn.tensor(name).assign(written.tensor(name).values());
  const test::Outputs a = runReferenceOn(written), b = runReferenceOn(builtIn);
  ASSERT_EQ(a.o.size(), b.o.size());
  for (size_t i = 0; i < a.o.size(); ++i)
    EXPECT_NEAR(a.o[i], b.o[i], 1e-12) << "o at " << i;
  for (size_t i = 0; i < a.lse.size(); ++i)
    EXPECT_TRUE(a.lse[i] == b.lse[i] || std::fabs(a.lse[i] - b.lse[i]) < 1e-12) << "lse at " << i;
  for (size_t i = 0; i < a.weights.size(); ++i)
    EXPECT_NEAR(a.weights[i], b.weights[i], 1e-12) << "weights at " << i;
}

// `spec` (with its aux tensors set by `setAux`) against mask=tensor built from `keep`.
void expectMaskOf(const std::string& spec, const std::function<void(tools::Call&)>& setAux,
                  const Keep& keep, int64_t seqQ = kTq) {
  tools::Call written = randomCall(kCommon + spec, kB, seqQ, kTk);
  setAux(written);
  tools::Call builtIn = randomCall(kCommon + "mask=tensor", kB, seqQ, kTk);
  std::vector<double> bits(kB * kH * seqQ * kTk);
  bool someRowEmpty = false;
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t h = 0; h < kH; ++h)
      for (int64_t i = 0; i < seqQ; ++i) {
        bool any = false;
        for (int64_t j = 0; j < kTk; ++j)
          any |= (bits[test::at4(kH, seqQ, kTk, b, h, i, j)] = keep(b, h, i, j)) != 0;
        someRowEmpty |= !any;
      }
  builtIn.tensor("mask").assign(bits);
  expectSameOutputs(written, builtIn);
  EXPECT_TRUE(someRowEmpty) << "each case includes a fully masked row";
}

// Document ids per batch entry: ragged documents, and in batch 1 a query row whose document has
// no key (id 9), so its row is fully masked.
const std::vector<int> kQueryDocs = {0, 0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2,  // batch 0
                                     0, 0, 0, 0, 0, 0, 0, 9, 1, 1, 1, 1, 1}; // batch 1
std::vector<int> keyDocs() {
  std::vector<int> docs(kB * kTk);
  for (int64_t j = 0; j < kTk; ++j) {
    docs[j] = j < 8 ? 0 : j < 15 ? 1 : 2;
    docs[kTk + j] = j < 12 ? 0 : 1;
  }
  return docs;
}

std::vector<double> asDoubles(const std::vector<int>& values) {
  return {values.begin(), values.end()};
}

TEST(ReferenceExpressions, DocumentMaskingIsTheTensorMaskOfItsDocuments) {
  const std::vector<int> kvDocs = keyDocs();
  expectMaskOf(
      "aux=\"q_doc:i32[B,Tq] kv_doc:i32[B,Tk]\" "
      "mask_mod=\"q_doc[b, q_idx] == kv_doc[b, kv_idx] && kv_idx <= qpos\"",
      [&](tools::Call& c) {
        c.tensor("q_doc").assign(asDoubles(kQueryDocs));
        c.tensor("kv_doc").assign(asDoubles(kvDocs));
      },
      [&](int64_t b, int64_t, int64_t i, int64_t j) {
        return kQueryDocs[b * kTq + i] == kvDocs[b * kTk + j] && j <= i + kOffset;
      });
}

TEST(ReferenceExpressions, PrefixLmSeesItsPrefixWhole) {
  const std::vector<int> prefix = {9, 0};
  expectMaskOf(
      "aux=\"prefix:i32[B]\" mask_mod=\"kv_idx <= qpos && q_idx != 4 || kv_idx < prefix[b]\"",
      [&](tools::Call& c) { c.tensor("prefix").assign(asDoubles(prefix)); },
      [&](int64_t b, int64_t, int64_t i, int64_t j) {
        return (j <= i + kOffset && i != 4) || j < prefix[b];
      });
}

TEST(ReferenceExpressions, SpeculativeTreeMaskFromPackedBits) {
  // Five draft tokens after 14 cached ones; draft i sees the cache, itself and its ancestors in
  // the tree 0 -> {1, 2}, 1 -> {3}, 2 -> {4}: bit d of tree[i] is set when draft i sees draft d.
  // Draft 4 of head 1 is masked whole, a fully masked row.
  constexpr int64_t kDrafts = 5, kCached = kTk - kDrafts;
  const std::vector<int> tree = {0b00001, 0b00011, 0b00101, 0b01011, 0b10101};
  expectMaskOf(
      "aux=\"tree:i32[Tq]\" "
      "mask_mod=\"(kv_idx < Tk - Tq || bit(tree[q_idx], kv_idx - (Tk - Tq))) && "
      "!(h == 1 && q_idx == 4)\"",
      [&](tools::Call& c) { c.tensor("tree").assign(asDoubles(tree)); },
      [&](int64_t, int64_t h, int64_t i, int64_t j) {
        if (h == 1 && i == 4)
          return false;
        return j < kCached || ((tree[i] >> (j - kCached)) & 1) != 0;
      },
      kDrafts);
}

TEST(ReferenceExpressions, RelativeBiasFromATableIsTheBiasTensor) {
  tools::Call written =
      randomCall(kCommon + "mask=causal aux=\"rel:f32[heads,257]\" "
                           "score_mod=\"score + rel[h, clamp(kv_idx - qpos, -128, 128) + 128]\"",
                 kB, kTq, kTk);
  tools::Call builtIn = randomCall(kCommon + "mask=causal bias=true", kB, kTq, kTk);
  const std::vector<double> rel = written.tensor("rel").values();
  std::vector<double> bias(kB * kH * kTq * kTk);
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t h = 0; h < kH; ++h)
      for (int64_t i = 0; i < kTq; ++i)
        for (int64_t j = 0; j < kTk; ++j) {
          const int64_t distance = std::clamp<int64_t>(j - (i + kOffset), -128, 128);
          bias[test::at4(kH, kTq, kTk, b, h, i, j)] = rel[h * 257 + distance + 128];
        }
  builtIn.tensor("bias").assign(bias);
  expectSameOutputs(written, builtIn);
}

TEST(ReferenceExpressions, WrittenSoftcapIsTheBuiltInSoftcap) {
  tools::Call written = randomCall(
      kCommon + "scale=4 params=\"cap=3\" score_mod=\"cap * tanh(score / cap)\"", kB, kTq, kTk);
  tools::Call builtIn = randomCall(kCommon + "scale=4 softcap=3", kB, kTq, kTk);
  expectSameOutputs(written, builtIn);
}

TEST(ReferenceExpressions, RandomBlocksFromPhiloxUnderTheExpressionsStream) {
  // Causal, with the diagonal blocks of 4 and a random third of the others kept (word 1 of
  // Philox at (q_idx // 4, kv_idx // 4, h, 0) under (seed_lo, seed_hi ^ 0xE8A12E55), read as a
  // signed int, floor mod 3), and row 2 masked whole.
  const uint64_t seed = 0x123456789abcdefULL;
  const uint64_t key = seed ^ (uint64_t{0xE8A12E55u} << 32);
  expectMaskOf("seed=" + std::to_string(seed) +
                   " mask_mod=\"q_idx != 2 && kv_idx <= qpos && (q_idx // 4 == kv_idx // 4 || "
                   "philox(q_idx // 4, kv_idx // 4, h, 0, 1) % 3 == 0)\"",
               [](tools::Call&) {},
               [&](int64_t, int64_t h, int64_t i, int64_t j) {
                 const random::Block word = random::philox4x32(
                     {static_cast<uint32_t>(i / 4), static_cast<uint32_t>(j / 4),
                      static_cast<uint32_t>(h), 0},
                     static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32));
                 const int64_t drawn = static_cast<int32_t>(word[1]);
                 return i != 2 && j <= i + kOffset &&
                        (i / 4 == j / 4 || ((drawn % 3) + 3) % 3 == 0);
               });
}

TEST(ReferenceExpressions, WrittenCausalIsTheBuiltInCausal) {
  tools::Call written = randomCall(kCommon + "mask_mod=\"kv_idx <= qpos\"", kB, kTq, kTk);
  tools::Call builtIn = randomCall(kCommon + "mask=causal", kB, kTq, kTk);
  expectSameOutputs(written, builtIn);
}

} // namespace
} // namespace attnc
