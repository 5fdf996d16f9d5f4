// Bad specs: each must fail with a message that names the key, the value and what is allowed.
#include "Abi/Arguments.h"
#include "Spec/Spec.h"

#include <filesystem>
#include <gtest/gtest.h>
#include <set>
#include <unistd.h>
#include <nlohmann/json.hpp>

namespace attnc {
namespace {

struct BadSpec {
  const char* spec;
  std::vector<const char*> mentions; // substrings the message must contain
};

void PrintTo(const BadSpec& bad, std::ostream* os) {
  *os << "'" << bad.spec << "'";
}

class BadSpecs : public ::testing::TestWithParam<BadSpec> {};

TEST_P(BadSpecs, FailsWithAPreciseMessage) {
  const BadSpec& bad = GetParam();
  try {
    Spec s = parseSpec(bad.spec);
    FAIL() << "accepted: " << bad.spec << " -> " << s.canonical();
  } catch (const SpecError& e) {
    std::string message = e.what();
    for (const char* mention : bad.mentions)
      EXPECT_NE(message.find(mention), std::string::npos)
          << "message '" << message << "' lacks '" << mention << "'";
  }
}

const BadSpec kBadSpecs[] = {
    {"", {"empty spec"}},
    {"heads=8", {"d_k is required"}},
    {"d_k=64 flavour=vanilla", {"unknown key 'flavour'", "known keys", "heads"}},
    {"d_k=64 heads", {"'heads' is not key=value"}},
    {"d_k=64 heads=", {"heads= has no value"}},
    {"d_k=64 heads=8 heads=4", {"'heads' is given twice"}},
    {"foo=1 foo=1", {"unknown key 'foo'"}},
    // The canonical form states d_model: a spec whose d_model no parser accepts is refused.
    {"variant=mha heads=2 d_k=40000", {"makes d_model=80000", "at most 65536"}},
    {"d_k=0", {"d_k=0", "an integer in [1, 65536]"}},
    {"d_k=-3", {"d_k=-3", "an integer in [1, 65536]"}},
    {"d_k=64.5", {"d_k=64.5", "an integer"}},
    {"d_k=sixty", {"d_k=sixty", "an integer"}},
    {"d_k=64 heads=0", {"heads=0", "[1, 4096]"}},
    {"d_k=64 heads=8 kv_heads=3", {"kv_heads=3 must divide heads=8"}},
    {"d_k=64 heads=2 kv_heads=4", {"kv_heads=4 must divide heads=2"}},
    {"d_k=64 variant=transformer",
     {"variant=transformer", "sdpa mha additive bilinear linear linformer"}},
    {"d_k=64 dtype=f64", {"dtype=f64", "f32 f16 bf16"}},
    {"d_k=64 layout=sbhd", {"layout=sbhd", "bhsd bshd"}},
    {"d_k=64 mask=triangular", {"unknown pattern 'triangular'", "causal"}},
    {"d_k=64 mask=causal+causal", {"'causal' is listed twice"}},
    {"d_k=64 mask=none+causal", {"none cannot be combined"}},
    {"d_k=64 dropout=0.1", {"dropout=0.1 needs seed=N"}},
    // Expressions, params and aux (the expression language's own errors: ExprTest.cpp).
    {"d_k=8 mask_mod=\"kv_idx <= qpos", {"quote at column 16 is not closed"}},
    {"d_k=8 mask_mod=\"\"", {"mask_mod= has no value"}},
    {"d_k=8 mask_mod=\"kv_idx + 1\"", {"mask_mod=\"kv_idx + 1\"", "column 1", "bool"}},
    {"d_k=8 mask_mod=\"philox(q_idx, kv_idx, h, b, 0) % 2 == 0\"",
     {"mask_mod calling philox() needs seed=N"}},
    {"d_k=8 score_mod=\"score + philox(0, 0, 0, 0, 0) % 2\"",
     {"score_mod calling philox() needs seed=N"}},
    {"d_k=8 seed=3 mask_mod=\"philox(q_idx, kv_idx, h, b, 0.5) > 0\"",
     {"column 29", "philox takes ints"}},
    {"d_k=8 seed=3 mask_mod=\"philox(q_idx, kv_idx, h, b) > 0\"",
     {"philox takes 5 arguments, not 4"}},
    {"d_k=8 seed=3 mask_mod=\"kv_idx <= qpos\"", {"seed=3 does not apply here"}},
    {"d_k=8 score_mod=\"score + cap\"", {"column 9", "unknown name 'cap'", "params="}},
    {"d_k=8 params=\"cap=30\"", {"params=cap=30 does not apply", "score_mod or mask_mod"}},
    {"d_k=8 aux=\"doc:i32[B,Tk]\"", {"aux=doc:i32[B,Tk] does not apply"}},
    {"variant=linear d_k=8 mask_mod=\"kv_idx <= qpos\"",
     {"mask_mod=kv_idx <= qpos does not apply", "variant=sdpa|mha|additive|bilinear"}},
    {"d_k=8 params=\"cap\" score_mod=score", {"'cap' is not name=number"}},
    {"d_k=8 params=\"cap=thirty\" score_mod=score", {"'thirty' is not a number"}},
    {"d_k=8 params=\"n=3000000000\" score_mod=score", {"n=3000000000 does not fit 32 bits"}},
    {"d_k=8 params=\"cap=1 cap=2\" score_mod=score", {"'cap' is given twice"}},
    {"d_k=8 params=\"tanh=1\" score_mod=score", {"'tanh' is a name of the expression"}},
    {"d_k=8 params=\"2x=1\" score_mod=score", {"'2x' is not a name"}},
    {"d_k=8 aux=\"grad_rel:f32[9]\" score_mod=\"score + grad_rel[0]\"",
     {"'grad_rel' begins as the backward's gradients are named"}},
    {"d_k=8 aux=\"doc:i64[B]\" score_mod=score", {"element type 'i64' is not i32 or f32"}},
    {"d_k=8 aux=\"doc:i32[B,T]\" score_mod=score", {"dim 'T' is not B, Tq, Tk, heads"}},
    {"d_k=8 aux=\"doc:i32[0]\" score_mod=score", {"dim '0' is not"}},
    {"d_k=8 aux=\"doc:i32[B\" score_mod=score", {"expected one of ',]'"}},
    {"d_k=8 aux=\"doc i32[B]\" score_mod=score", {"expected one of ':'"}},
    {"d_k=8 aux=\"t:f32[1,1,1,1,1]\" score_mod=score", {"t has 5 dims; at most 4"}},
    {"d_k=8 aux=\"doc:i32[B] doc:f32[Tk]\" score_mod=score", {"'doc' is declared twice"}},
    {"d_k=8 aux=\"kv_idx:i32[B]\" score_mod=score", {"'kv_idx' is a name of the expression"}},
    // A name that is a kernel argument of any spec (issue 52: these were accepted), whatever this
    // spec's other keys: BadSpecNames below tries every one.
    {"d_k=8 bias=true aux=\"bias:f32[Tk]\" score_mod=\"score + bias[kv_idx]\"",
     {"aux=\"bias:f32[Tk]\": 'bias' is the name of a kernel argument"}},
    {"d_k=8 params=\"q=1\" score_mod=\"score + q\"",
     {"params=\"q=1\": 'q' is the name of a kernel argument", "choose another"}},
    {"d_k=8 params=\"cap=1 lengths=4\" mask_mod=\"kv_idx < lengths\"", {"'lengths' is the name"}},
    {"d_k=8 params=\"mask=1\" mask_mod=\"kv_idx < mask\"", {"'mask' is the name"}},
    {"d_k=8 aux=\"k_new:f32[Tk]\" score_mod=\"score + k_new[kv_idx]\"", {"'k_new' is the name"}},
    // A param or aux tensor that no expression reads (issue 52: an unread aux tensor was a
    // kernel argument).
    {"d_k=8 params=\"cap=30 n=2\" score_mod=\"cap * tanh(score / cap)\"",
     {"params=\"cap=30 n=2\": no expression reads 'n'"}},
    {"d_k=8 aux=\"t:f32[Tk] u:i32[B]\" score_mod=\"score + t[kv_idx]\"",
     {"aux=\"t:f32[Tk] u:i32[B]\": no expression reads 'u'", "kernel argument"}},
    {"d_k=8 params=\"cap=30\" aux=\"t:f32[Tk]\" score_mod=\"score + t[kv_idx]\"",
     {"no expression reads 'cap'"}},
    // An aux name is a C++ member and parameter in a linked library's header (issue 52: these
    // compiled into a header that did not).
    {"d_k=8 aux=\"class:f32[Tk]\" score_mod=\"score + class[kv_idx]\"",
     {"'class' cannot be a C++ member of a linked library's header", "C or C++ keyword"}},
    {"d_k=8 aux=\"int:f32[Tk]\" score_mod=\"score + int[kv_idx]\"", {"C or C++ keyword"}},
    {"d_k=8 aux=\"this:f32[Tk]\" score_mod=\"score + this[kv_idx]\"", {"C or C++ keyword"}},
    {"d_k=8 aux=\"__t:f32[Tk]\" score_mod=\"score + __t[kv_idx]\"", {"reserved"}},
    {"d_k=8 aux=\"_T:f32[Tk]\" score_mod=\"score + _T[kv_idx]\"", {"reserved"}},
    {"d_k=8 aux=\"num_threads:f32[Tk]\" score_mod=\"score + num_threads[kv_idx]\"",
     {"'num_threads' is a parameter of the kernel's call"}},
    {"d_k=8 aux=\"stream:f32[Tk]\" score_mod=\"score + stream[kv_idx]\"",
     {"'stream' is a parameter of the kernel's call"}},
    {"d_k=8 params=\"doc=1\" aux=\"doc:f32[Tk]\" score_mod=score",
     {"'doc' is both a param and an aux tensor"}},
    {"d_k=8 aux=\"doc:i32[B,Tk]\" mask_mod=\"doc[b, q_idx] == doc[b, kv_idx]\"",
     {"column 8", "index 2 of doc (q_idx) is not provably below Tk", "clamp(q_idx, 0, Tk - 1)"}},
    {"d_k=8 aux=\"doc:i32[B,Tk]\" mask_mod=\"doc[b, qpos] == doc[b, kv_idx]\"",
     {"index 2 of doc (qpos) is not provably at least 0"}},
    {"d_k=8 aux=\"rel:f32[heads,256]\" score_mod=\"rel[h, clamp(kv_idx - qpos, -128, 128) + 128]\"",
     {"is not provably below 256", "clamp(clamp(kv_idx - qpos, -128, 128) + 128, 0, 256 - 1)"}},
    {"d_k=8 aux=\"t:i32[8]\" mask_mod=\"t[t[kv_idx % 8]] > 0\"",
     {"index 1 of t (t[kv_idx % 8]) is not provably within [0, 8)"}},
    {"d_k=8 aux=\"t:i32[B]\" mask_mod=\"t[b + 1] > 0\"", {"index 1 of t (b + 1)", "below B"}},
    // Kernels compute ints in 32 bits: a literal past them is refused, as a param is, and an
    // index whose int arithmetic may leave them (at sizes up to 2^31 - 1) proves nothing. So do
    // float bounds that only f64 gives: f32 rounds 2^24 + 3 up, overflows past 3.4e38 and
    // flushes 1e-60 to 0. A float literal is an f32, so one that no normal f32 holds is refused.
    {"d_k=8 aux=\"x:i32[Tk]\" score_mod=\"score + x[kv_idx + 9007199254740993 - "
     "9007199254740992]\"",
     {"column 20", "'9007199254740993' does not fit 32 bits"}},
    {"d_k=8 aux=\"x:i32[Tk]\" score_mod=\"score + x[min(abs(-9223372036854775807 - 1), Tk - 1)]\"",
     {"'9223372036854775807' does not fit 32 bits"}},
    {"d_k=8 aux=\"x:i32[Tk]\" score_mod=\"score + x[min(abs(-2147483647 - 1), Tk - 1)]\"",
     {"index 1 of x (min(abs(-2147483647 - 1), Tk - 1)) is not provably at least 0"}},
    {"d_k=8 aux=\"x:i32[Tk]\" score_mod=\"score + x[min(kv_idx * 2, Tk - 1)]\"",
     {"index 1 of x (min(kv_idx * 2, Tk - 1)) is not provably at least 0"}},
    {"d_k=8 aux=\"x:i32[Tk]\" score_mod=\"score + x[(kv_idx * 2) // 2]\"",
     {"index 1 of x (kv_idx * 2 // 2) is not provably within [0, Tk)"}},
    {"d_k=8 aux=\"x:i32[Tk]\" score_mod=\"score + x[floor(kv_idx * 1.0)]\"",
     {"index 1 of x (floor(kv_idx * 1.0)) is not provably below Tk"}},
    {"d_k=8 aux=\"x:i32[8]\" score_mod=\"score + x[where(1e-30 * 1e-30 > 0.0, 0, 9)]\"",
     {"is not provably below 8"}},
    {"d_k=8 aux=\"x:i32[8]\" score_mod=\"score + x[where(2e38 * 2.0 < 3e38, 0, 9)]\"",
     {"is not provably below 8"}},
    {"d_k=8 score_mod=\"score + 1e39\"",
     {"column 9", "'1e39' is not an f32", "at most 3.4028235e38"}},
    {"d_k=8 score_mod=\"score * 1e-46\"", {"'1e-46' is not an f32", "at least 1.1754944e-38"}},
    {"d_k=8 score_mod=\"score + 1e400\"", {"'1e400' is not an f32"}},
    {"d_k=8 score_mod=\"score + big\" params=\"big=1e300\"",
     {"big=1e300 is not an f32", "0 or a normal f32 number"}},
    {"d_k=64 dropout=1", {"dropout=1", "[0, 1)"}},
    {"d_k=64 dropout=-0.1", {"dropout=-0.1", "[0, 1)"}},
    {"d_k=64 scale=0", {"scale=0", "a normal f32 number"}},
    {"d_k=64 scale=nan", {"scale=nan", "a normal f32 number"}},
    // Values no f32 kernel can honour: rounded to infinity or flushed to zero.
    {"d_k=64 scale=1.79e308", {"scale=1.79e308", "below 3.4028235e38"}},
    {"d_k=64 scale=4.9e-324", {"scale=4.9e-324", "at least 1.1754944e-38"}},
    {"d_k=64 scale=1e-39", {"scale=1e-39", "at least 1.1754944e-38"}},
    {"d_k=64 softcap=-1", {"softcap=-1", "0 (off) or a normal f32 number"}},
    {"d_k=64 softcap=1e-40", {"softcap=1e-40", "0 (off) or a normal f32 number"}},
    {"d_k=64 rope=true rope_theta=1e39", {"rope_theta=1e39", "a normal f32 number"}},
    {"d_k=64 causal_align=top_left", {"causal_align=top_left does not apply"}},
    {"d_k=64 mask=causal causal_align=middle", {"causal_align=middle", "top_left bottom_right"}},
    {"d_k=64 mask=window", {"needs window_left=N"}},
    {"d_k=64 window_left=4", {"window_left=4 does not apply", "mask includes window or dilated"}},
    {"d_k=64 mask=window+dilated window_left=2 dilation=2", {"window and dilated"}},
    {"d_k=64 mask=global", {"needs global_tokens=N"}},
    {"d_k=64 mask=strided", {"needs stride=N"}},
    {"d_k=64 mask=dilated window_left=3", {"needs dilation=N"}},
    {"d_k=64 mask=block_sparse", {"needs block=N"}},
    {"d_k=64 mask=bigbird block=16", {"needs seed=N"}},
    {"d_k=64 mask=bigbird block=16 seed=1 window_blocks=2", {"window_blocks=2 must be odd"}},
    {"d_k=64 seed=3", {"seed=3 does not apply"}},
    {"d_k=64 rope=maybe", {"rope=maybe", "true or false"}},
    {"d_k=64 rope=true rope_dims=7", {"rope_dims=7 must be even"}},
    {"d_k=64 rope=true rope_dims=128", {"rope_dims=128", "at most d_k=64"}},
    {"d_k=64 rope_theta=10000", {"rope_theta=10000 does not apply", "rope=true"}},
    {"variant=additive d_k=64 rope=true", {"rope=true does not apply", "variant=sdpa|mha"}},
    {"d_k=64 pe=sinusoidal", {"pe=sinusoidal does not apply", "variant=mha"}},
    {"variant=mha heads=3 d_k=5 pe=sinusoidal", {"pe=sinusoidal needs an even d_model"}},
    {"variant=mha heads=3 d_model=512", {"d_model=512", "multiple of heads=3"}},
    {"variant=mha d_k=64 layout=bshd", {"layout=bshd does not apply"}},
    {"d_k=64 d_model=512", {"d_model=512 does not apply", "variant=mha"}},
    {"d_k=64 d_q=32", {"d_q=32 does not apply", "variant=additive|bilinear"}},
    {"variant=linear d_k=64 lse=true", {"lse=true does not apply"}},
    {"variant=linear d_k=64 mask=window window_left=3", {"not supported by variant=linear"}},
    {"variant=linear d_k=64 dropout=0.1", {"dropout=0.1 does not apply"}},
    {"variant=linear d_k=64 feature_map=favor", {"feature_map=favor needs seed=N"}},
    {"variant=linear d_k=64 feature_map=gelu", {"feature_map=gelu", "elu1 relu favor"}},
    {"variant=linear d_k=64 scale=0.5", {"scale=0.5 does not apply"}},
    {"variant=linformer d_k=64", {"needs proj_len=N"}},
    {"variant=linformer d_k=64 proj_len=8 mask=causal", {"not supported by variant=linformer"}},
    {"variant=linformer d_k=64 proj_len=8 alibi=true", {"alibi=true does not apply"}},
    {"preset=gpt5", {"preset=gpt5", "unknown preset", "llama3-8b"}},
    // Ragged queries: each sequence runs as its own call, so what reads the batch index or the
    // whole batch's query rows is refused.
    {"heads=2 d_k=8 ragged_q=true", {"ragged_q=true does not apply", "kv_cache=contiguous|paged"}},
    {"heads=2 d_k=8 kv_append=true",
     {"kv_append=true does not apply", "kv_cache=contiguous|paged"}},
    {"heads=2 d_k=8 kv_cache=paged page_size=16 ragged_q=true", {"ragged_q=true", "layout=bshd"}},
    {"heads=2 d_k=8 layout=bshd kv_cache=contiguous ragged_q=true weights=true",
     {"ragged_q=true with weights=true"}},
    {"heads=2 d_k=8 layout=bshd kv_cache=contiguous ragged_q=true dropout=0.1 seed=1",
     {"ragged_q=true with dropout", "batch index b"}},
    {"heads=2 d_k=8 layout=bshd kv_cache=contiguous ragged_q=true bias=true",
     {"ragged_q=true with bias=true", "score_mod"}},
    {"heads=2 d_k=8 layout=bshd kv_cache=contiguous ragged_q=true mask=causal+tensor",
     {"mask=causal+tensor", "shaped by Tq", "mask_mod"}},
    {"heads=2 d_k=8 layout=bshd kv_cache=contiguous ragged_q=true mask=block_sparse block=16",
     {"block_layout", "shaped by Tq"}},
    {"heads=2 d_k=8 layout=bshd kv_cache=contiguous ragged_q=true aux=\"x:f32[Tq,Tk]\" "
     "mask_mod=\"x[q_idx, kv_idx] > 0\"",
     {"'x' has Tq as dimension 0", "B only as its first dimension"}},
    {"heads=2 d_k=8 layout=bshd kv_cache=contiguous ragged_q=true aux=\"x:f32[heads,B]\" "
     "score_mod=\"score + x[h, b]\"",
     {"'x' has B as dimension 1"}},
    {"heads=2 d_k=8 layout=bshd kv_cache=contiguous ragged_q=true score_mod=\"score + b\"",
     {"score_mod=\"score + b\" at column 9", "b may only be the first index"}},
};

INSTANTIATE_TEST_SUITE_P(Spec, BadSpecs, ::testing::ValuesIn(kBadSpecs));

// A spec's expression is at most 4096 characters, which bounds its tree's depth.
TEST(BadSpecExpression, LongerThan4096CharactersIsRefused) {
  std::string sum = "score";
  while (sum.size() <= 4096)
    sum += " + 1";
  try {
    parseSpec("d_k=8 score_mod=\"" + sum + "\"");
    FAIL() << "accepted";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("score_mod is 4097 characters long; an expression may "
                                         "have at most 4096"),
              std::string::npos)
        << e.what();
  }
}

TEST(BadSpecJson, RejectsNonObjectsAndWrongTypes) {
  EXPECT_THROW(parseSpecJson(nlohmann::json::array()), SpecError);
  try {
    parseSpecJson(nlohmann::json::parse(R"({"d_k": [64]})"));
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("d_k: a JSON array is not allowed"), std::string::npos);
  }
  EXPECT_THROW(parseSpecJson(nlohmann::json::parse(R"({"d_k": null})")), SpecError);
  EXPECT_THROW(parseSpecJson(nlohmann::json::parse(R"({"d_k": 64, "mask": [1]})")), SpecError);
}

TEST(BadSpecJson, MissingOrBrokenFile) {
  EXPECT_THROW(loadSpec("/nonexistent/spec.json"), SpecError);
}

void expectJsonRefused(const std::string& text, const std::string& mention) {
  try {
    parseSpecJson(parseJsonObjectStrictly(text, "the spec"));
    FAIL() << "accepted " << text;
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
  }
}

TEST(BadSpecJson, NothingLenient) {
  expectJsonRefused(R"({"d_k": 64, "d_k": 32})", "key 'd_k' is given twice");
  expectJsonRefused(R"({"d_k": "64"})", "d_k: the JSON string \"64\" is not allowed");
  expectJsonRefused(R"({"d_k": 64, "lse": "true"})", "as a JSON boolean");
  expectJsonRefused("{\"d_k\": 64,\n  \"heads\" 8}", "line 2, column");
  // Found by SpecJsonFuzzer: a number past a double escaped as an internal error.
  expectJsonRefused(R"({"d_k": 8e646})", "number overflow parsing '8e646'");
  EXPECT_EQ(parseSpecJson(parseJsonObjectStrictly(R"({"d_k": 64, "mask": "causal"})", "s")).dK,
            64);
}

// JSON strings carry any character. A NUL once cut every message that echoed the value short
// ("mask=cau"), and an escape reached the terminal: control characters are refused, named and
// never echoed, in keys and values of JSON specs and in spec text alike.
TEST(BadSpecJson, ControlCharactersAreRefusedUnechoed) {
  for (const std::string& text :
       {std::string(R"({"mask": "cau\u0000sal", "d_k": 8})"),
        std::string(R"({"d_k": 8, "score_mod": "score\u001b[31m + 1"})"),
        std::string(R"({"ma\u0000sk": "causal", "d_k": 8})"),
        std::string(R"({"d_k": 8, "params": {"c\u0000ap": 30}})")}) {
    try {
      parseSpecJson(parseJsonObjectStrictly(text, "the spec"));
      FAIL() << "accepted " << text;
    } catch (const SpecError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("holds the control character U+00"), std::string::npos) << message;
      EXPECT_NE(message.find("; a spec is printable text"), std::string::npos) << message;
      EXPECT_EQ(message.find('\x1b'), std::string::npos) << message;
    }
  }
  EXPECT_THROW(parseSpec(std::string("d_k=8 mask=cau\0sal", 18)), SpecError);
  try {
    parseSpec("d_k=8 score_mod=\"score\x1b[31m + 1\"");
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("the spec holds the control character U+001B at "
                                         "offset 22"),
              std::string::npos)
        << e.what();
  }
  // Whitespace stays whitespace.
  EXPECT_EQ(parseSpec("d_k=8\n\tmask=causal").dK, 8);
}

TEST(BadSpecJson, FilesThatAreNotSpecs) {
  try { // /dev/zero never ends: it must be refused, not read
    loadSpec("/dev/zero.json");
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("no such file"), std::string::npos) << e.what();
  }
  const std::filesystem::path link =
      std::filesystem::temp_directory_path() / ("attnc_zero_" + std::to_string(::getpid()) + ".json");
  std::filesystem::create_symlink("/dev/zero", link);
  try {
    loadSpec(link.string());
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
  std::filesystem::remove(link);
}

// Every name a kernel argument has in any spec, whatever this one's keys, is refused as a param
// and as an aux tensor. The names are kernelArguments' own; this list is the check that they
// cover every variant, cache and option (docs/spec.md, Tensors of a bundle).
TEST(BadSpecNames, EveryKernelArgumentOfAnySpec) {
  const std::set<std::string> expected{
      // Every spec's inputs and outputs; a cache's; the runtime's (kv_append, ragged_q).
      "q", "k", "v", "o", "lse", "weights", "k_pages", "v_pages", "k_scale", "v_scale", "seq_lens",
      "block_table", "k_new", "v_new", "cu_seqlens_q",
      // The options'; the variants' parameters.
      "lengths", "mask", "block_layout", "bias", "sinks", "w_q", "w_k", "w_v", "w_o", "w1", "w2",
      "v_a", "w", "e", "f", "omega",
      // mha's save_projections.
      "q_proj", "k_proj", "v_proj", "o_heads"};
  EXPECT_EQ(builtinArgumentNames(), expected);
  for (const std::string& name : builtinArgumentNames()) {
    for (const std::string& spec :
         {"d_k=8 params=\"" + name + "=1\" score_mod=\"score + " + name + "\"",
          "d_k=8 aux=\"" + name + ":f32[Tk]\" score_mod=\"score + " + name + "[kv_idx]\""}) {
      try {
        parseSpec(spec);
        ADD_FAILURE() << "accepted " << spec;
      } catch (const SpecError& e) {
        EXPECT_NE(std::string(e.what()).find("'" + name + "' is the name of a kernel argument"),
                  std::string::npos)
            << e.what();
      }
    }
  }
}

// Names C and C++ programs use that are no keyword, not reserved and not the call's: the linked
// header compiles with them (tests/cli/test_aot.py), so they stay aux names.
TEST(BadSpecNames, CommonCIdentifiersAreAuxNames) {
  for (const char* name : {"NULL", "errno", "linux", "assert", "DLTensor", "int32_t", "std"})
    EXPECT_NO_THROW(parseSpec(std::string("d_k=8 aux=\"") + name + ":f32[Tk]\" score_mod=\"" +
                              name + "[kv_idx]\""))
        << name;
}

} // namespace
} // namespace attnc
