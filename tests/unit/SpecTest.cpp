#include "Abi/Arguments.h"
#include "Spec/Spec.h"

#include "Spec/Presets.h"
#include "Spec/SpecKeys.h"

#include <cmath>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace attnc {
namespace {

TEST(Spec, FillsDefaults) {
  Spec s = parseSpec("heads=8 d_k=64");
  EXPECT_EQ(s.variant, Variant::Sdpa);
  EXPECT_EQ(s.kvHeads, 8);
  EXPECT_EQ(s.dV, 64);
  EXPECT_DOUBLE_EQ(s.scale, 0.125);
  EXPECT_EQ(s.dtype, DType::F32);
  EXPECT_EQ(s.layout, Layout::Bhsd);
  EXPECT_TRUE(s.masks.empty());
}

TEST(Spec, CanonicalSortsKeysAndListsOnlyKeysThatApply) {
  Spec s = parseSpec("mask=causal d_k=64 heads=8 kv_heads=2 variant=sdpa");
  EXPECT_EQ(s.canonical(),
            "alibi=false bias=false causal_align=bottom_right d_k=64 d_v=64 dropout=0 dtype=f32 "
            "heads=8 kv_heads=2 layout=bhsd lse=false mask=causal rope=false scale=0.125 "
            "softcap=0 variant=sdpa weights=false");
  // No position-dependent feature: causal_align is not part of the spec.
  EXPECT_EQ(parseSpec("d_k=64").canonical().find("causal_align"), std::string::npos);
}

TEST(Spec, AdditiveScaleDefaultsToOneAndQueryDimMayDiffer) {
  Spec s = parseSpec("variant=additive d_q=1000 d_k=2000 d_attn=1000");
  EXPECT_DOUBLE_EQ(s.scale, 1.0);
  EXPECT_EQ(s.dQ, 1000);
  EXPECT_EQ(s.dV, 2000);
}

TEST(Spec, MhaDerivesHeadDimFromModelWidth) {
  Spec s = parseSpec("variant=mha heads=8 d_model=512");
  EXPECT_EQ(s.dK, 64);
  EXPECT_EQ(parseSpec("variant=mha heads=8 d_k=32").dModel, 256);
}

TEST(Spec, MaskPatternsAreCanonicallyOrdered) {
  Spec s = parseSpec("d_k=8 mask=window+causal window_left=3");
  EXPECT_TRUE(s.masks.has(MaskKind::Causal));
  EXPECT_TRUE(s.masks.has(MaskKind::Window));
  EXPECT_NE(s.canonical().find("mask=causal+window"), std::string::npos);
}

// Every preset, and a spec exercising every key, survive text and JSON round trips exactly.
class RoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(RoundTrip, CanonicalTextAndJson) {
  Spec s = parseSpec(GetParam());
  Spec again = parseSpec(s.canonical());
  EXPECT_EQ(again.canonical(), s.canonical());
  EXPECT_EQ(again.hash(), s.hash());
  Spec fromJson = parseSpecJson(s.toJson());
  EXPECT_EQ(fromJson.canonical(), s.canonical());
  EXPECT_EQ(parseSpecJson(nlohmann::json::parse(s.toJson().dump())).hash(), s.hash());
}

std::vector<std::string> roundTripSpecs() {
  std::vector<std::string> specs;
  for (const Preset& p : presets())
    specs.push_back("preset=" + std::string(p.name));
  specs.push_back("d_k=80 heads=3 scale=0.3 softcap=30 alibi=true bias=true dropout=0.25 "
                  "seed=18446744073709551615 mask=causal+padding+tensor+block_sparse+bigbird "
                  "block=16 causal_align=top_left lse=true weights=true dtype=f16 layout=bshd");
  specs.push_back("d_k=64 mask=dilated+global+strided window_left=4 window_right=2 dilation=3 "
                  "global_tokens=2 stride=5 rope=true rope_dims=32 rope_style=interleaved "
                  "rope_theta=500000.5");
  specs.push_back("variant=linear d_k=32 feature_map=relu mask=causal+padding weights=true");
  specs.push_back("variant=bilinear d_q=7 d_k=5 d_v=3 mask=padding");
  specs.push_back("d_k=16 heads=4 kv_heads=2 aux=\"q_doc:i32[B,Tq] kv_doc:i32[B,Tk] "
                  "rel:f32[heads, 257]\" params=\"gain=1e-3 cap=30 n=-4\" "
                  "mask_mod=\"q_doc[b,q_idx]==kv_doc[b,kv_idx]&&((kv_idx<=qpos))\" "
                  "score_mod=\"where(score > cap, cap, score) * gain + "
                  "rel[h, clamp(kv_idx - qpos, -128, 128) + 128] + n\"");
  specs.push_back("variant=mha heads=2 d_k=8 mask=causal score_mod=score*2");
  return specs;
}

INSTANTIATE_TEST_SUITE_P(Specs, RoundTrip, ::testing::ValuesIn(roundTripSpecs()));

TEST(SpecExpressions, CanonicalFormNormalisesExpressionsParamsAndAux) {
  const Spec a = parseSpec("d_k=8 params=\"shift=2 cap=30.0\" aux=\"doc:i32[ B , Tk ]\" "
                           "mask_mod=\"(doc[b, kv_idx] == 1)\" "
                           "score_mod=\"cap*tanh(score/cap)+shift\"");
  const Spec b = parseSpec("d_k=8 params=\"cap=3e1 shift=2\" aux=\"doc:i32[B,Tk]\" "
                           "mask_mod=\"doc[b,kv_idx]==1\" "
                           "score_mod=\"cap * tanh((score / cap)) + shift\"");
  EXPECT_EQ(a.canonical(), b.canonical());
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_NE(a.canonical().find("aux=\"doc:i32[B,Tk]\""), std::string::npos) << a.canonical();
  EXPECT_NE(a.canonical().find("params=\"cap=30.0 shift=2\""), std::string::npos) << a.canonical();
  EXPECT_NE(a.canonical().find("score_mod=\"cap * tanh(score / cap) + shift\""), std::string::npos);
  // Specs without expressions print none of the new keys: their canonical text, and hash, are
  // what they were before expressions existed.
  EXPECT_EQ(parseSpec("d_k=8").canonical().find("mod"), std::string::npos);
}

TEST(SpecExpressions, JsonTakesParamsAsAnObject) {
  const Spec s = parseSpecJson(nlohmann::json::parse(
      R"({"d_k": 8, "params": {"cap": 30.0, "gain": 2},
          "score_mod": "cap * tanh(score / cap) * gain"})"));
  EXPECT_EQ(s.params.size(), 2u);
  EXPECT_EQ(s.params[0].value.type, expr::Type::Float);
  EXPECT_EQ(s.params[1].value.type, expr::Type::Int);
}

// Aux indices the check proves in exact integer arithmetic: a sum keeps its exact form, so
// kv_idx - kv_idx is 0 and qpos - q_idx is Tk - Tq; +, - and * by a constant wrap in kernels as
// in the reference, so kv_idx + 2 - 2 is kv_idx again even where kv_idx + 2 passes 2^31 - 1.
TEST(SpecExpressions, AuxIndicesAreProvedExactly) {
  auto accepts = [](const std::string& aux, const std::string& index) {
    EXPECT_NO_THROW(parseSpec("d_k=8 aux=\"x:i32[" + aux + "]\" score_mod=\"score + x[" + index +
                              "]\""))
        << aux << ": " << index;
  };
  for (const char* zero : {"kv_idx - kv_idx", "2 * kv_idx - kv_idx - kv_idx",
                           "(kv_idx - kv_idx) * 2147483647", "qpos - q_idx + Tq - Tk",
                           "(2147483647 + 1) * 0", "abs(q_idx - kv_idx) % 1"})
    accepts("1", zero);
  for (const char* key : {"kv_idx + 2 - 2", "-(-kv_idx)", "min(kv_idx + 1, Tk - 1)",
                          "kv_idx + 2147483647 - 2147483647", "clamp(kv_idx * 2, 0, Tk - 1)"})
    accepts("Tk", key);
}

TEST(SpecExpressions, AuxTensorsAreKernelInputsAfterTheSpecsOwn) {
  const Spec s = parseSpec("d_k=8 heads=3 bias=true aux=\"rel:f32[heads,9] doc:i32[B,Tk]\" "
                           "score_mod=\"score + rel[h, 0] * doc[b, kv_idx]\"");
  std::vector<std::string> names;
  for (const Argument& a : kernelArguments(s))
    names.push_back(a.name);
  EXPECT_EQ(names, (std::vector<std::string>{"q", "k", "v", "bias", "rel", "doc", "o"}));
}

TEST(Spec, HashIsStableAndDistinguishesSpecs) {
  EXPECT_EQ(parseSpec("d_k=64 heads=8").hash(), parseSpec("heads=8 d_k=64 kv_heads=8").hash());
  EXPECT_NE(parseSpec("d_k=64 heads=8").hash(), parseSpec("d_k=64 heads=4").hash());
  EXPECT_EQ(parseSpec("d_k=64 heads=8").hash().size(), 16u);
  // Pinned: the hash names artifacts and keys the tuning database, so it must never drift.
  EXPECT_EQ(parseSpec("preset=gpt2").hash(), "67c5c965b3699789");
}

// A key added after the hashes were pinned (sinks) is listed only when set, so specs without it
// keep their hash; when set, it is in the canonical form, the JSON and the hash.
TEST(Spec, KeysListedOnlyWhenSetKeepOlderHashes) {
  EXPECT_EQ(parseSpec("preset=gpt2 sinks=false").hash(), "67c5c965b3699789");
  EXPECT_EQ(parseSpec("d_k=8 sinks=false").canonical().find("sinks"), std::string::npos);
  const Spec withSinks = parseSpec("d_k=8 sinks=true");
  EXPECT_NE(withSinks.canonical().find("sinks=true"), std::string::npos);
  EXPECT_EQ(withSinks.toJson().at("sinks"), true);
  EXPECT_NE(withSinks.hash(), parseSpec("d_k=8").hash());
  EXPECT_EQ(parseSpec(withSinks.canonical()).hash(), withSinks.hash());
  EXPECT_THROW(parseSpec("variant=linear d_k=8 sinks=true"), SpecError);
}

TEST(Spec, PresetKeysYieldToOverridesAndDropWhenMoot) {
  Spec s = parseSpec("preset=mistral-7b dtype=bf16 mask=causal");
  EXPECT_EQ(s.dtype, DType::BF16);
  EXPECT_EQ(s.heads, 32);
  EXPECT_FALSE(s.masks.has(MaskKind::Window)); // window_left=4095 from the preset is dropped
  EXPECT_EQ(s.canonical().find("window_left"), std::string::npos);
}

TEST(Spec, JsonAcceptsMaskArraysAndNumbers) {
  Spec s = parseSpecJson(nlohmann::json::parse(
      R"({"variant": "sdpa", "heads": 4, "d_k": 32, "mask": ["causal", "padding"],
          "softcap": 30.5, "lse": true})"));
  EXPECT_TRUE(s.masks.has(MaskKind::Padding));
  EXPECT_DOUBLE_EQ(s.softcap, 30.5);
  EXPECT_TRUE(s.lse);
}

TEST(Spec, EveryKeyHasHelpAndAllowedValues) {
  for (const SpecKey& key : specKeys()) {
    EXPECT_FALSE(key.help.empty()) << key.name;
    EXPECT_FALSE(key.allowed.empty()) << key.name;
  }
}

} // namespace
} // namespace attnc
