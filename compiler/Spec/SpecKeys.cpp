#include "Spec/SpecKeys.h"

#include "Spec/SpecExpressions.h"
#include "Spec/SpecNames.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <vector>

namespace attnc {
namespace {

constexpr int64_t kMaxHeads = 4096;
constexpr int64_t kMaxLength = int64_t{1} << 31; // positions fit the RNG's 32-bit counters

using Applies = std::function<bool(const Spec&)>;

[[noreturn]] void badValue(std::string_view key, std::string_view value,
                           const std::string& allowed) {
  throw SpecError(std::string(key) + "=" + std::string(value) + ": expected " + allowed);
}

std::string printInteger(int64_t v) {
  return std::to_string(v);
}

// Shortest text that parses back to the same double.
std::string printReal(double v) {
  char buffer[32];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), v);
  return std::string(buffer, end);
}

std::string intRange(int64_t lo, int64_t hi) {
  return "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

SpecKey integerKey(std::string_view name, int64_t Spec::*field, int64_t lo, int64_t hi,
                   std::string_view when, Applies applies, std::string_view help) {
  std::string allowed = intRange(lo, hi);
  return {name,
          ValueKind::Integer,
          allowed,
          when,
          help,
          std::move(applies),
          [=](Spec& s, std::string_view value) {
            int64_t v = 0;
            auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
            if (ec != std::errc() || end != value.data() + value.size() || v < lo || v > hi)
              badValue(name, value, allowed);
            s.*field = v;
          },
          [=](const Spec& s) { return printInteger(s.*field); }};
}

// A finite real in (lo, hi) or [lo, hi), or 0 when `zeroIsOff`, as `allowed` describes.
SpecKey realKey(std::string_view name, double Spec::*field, double lo, bool loInclusive, double hi,
                std::string allowed, std::string_view when, Applies applies,
                std::string_view help, bool zeroIsOff = false) {
  return {name,
          ValueKind::Real,
          allowed,
          when,
          help,
          std::move(applies),
          [=](Spec& s, std::string_view value) {
            double v = 0;
            auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
            bool ok = ec == std::errc() && end == value.data() + value.size() && std::isfinite(v) &&
                      (((loInclusive ? v >= lo : v > lo) && v < hi) || (zeroIsOff && v == 0));
            if (!ok)
              badValue(name, value, allowed);
            s.*field = v;
          },
          [=](const Spec& s) { return printReal(s.*field); }};
}

SpecKey booleanKey(std::string_view name, bool Spec::*field, std::string_view when, Applies applies,
                   std::string_view help) {
  return {name,
          ValueKind::Boolean,
          "true or false",
          when,
          help,
          std::move(applies),
          [=](Spec& s, std::string_view value) {
            if (value == "true" || value == "1")
              s.*field = true;
            else if (value == "false" || value == "0")
              s.*field = false;
            else
              badValue(name, value, "true or false");
          },
          [=](const Spec& s) { return std::string(s.*field ? "true" : "false"); }};
}

SpecKey listedOnlyWhenSet(SpecKey key) {
  key.listedOnlyWhenSet = true;
  return key;
}

template <class E>
SpecKey nameKey(std::string_view name, E Spec::*field, NameTable<E> table, std::string_view when,
                Applies applies, std::string_view help) {
  std::string allowed = "one of: " + joinNames(table);
  return {name,
          ValueKind::Name,
          allowed,
          when,
          help,
          std::move(applies),
          [=](Spec& s, std::string_view value) {
            auto v = lookupName(table, value);
            if (!v)
              badValue(name, value, allowed);
            s.*field = *v;
          },
          [=](const Spec& s) { return std::string(nameOf(table, s.*field)); }};
}

SpecKey maskKey() {
  std::string allowed = "none, or patterns joined by '+' from: " + joinNames(maskKindNames());
  return {"mask",
          ValueKind::Mask,
          allowed,
          "always",
          "mask patterns (constraints intersect, "
          "sparsity patterns unite)",
          [](const Spec&) { return true; },
          [=](Spec& s, std::string_view value) {
            s.masks = {};
            if (value == "none")
              return;
            std::string_view rest = value;
            while (true) {
              size_t plus = rest.find('+');
              std::string_view word = rest.substr(0, plus);
              auto kind = lookupName(maskKindNames(), word);
              if (word == "none")
                throw SpecError("mask=" + std::string(value) +
                                ": none cannot be combined with other patterns");
              if (!kind)
                throw SpecError("mask=" + std::string(value) + ": unknown pattern '" +
                                std::string(word) + "'; expected " + allowed);
              if (s.masks.has(*kind))
                throw SpecError("mask=" + std::string(value) + ": pattern '" + std::string(word) +
                                "' is listed twice");
              s.masks.add(*kind);
              if (plus == std::string_view::npos)
                break;
              rest = rest.substr(plus + 1);
            }
          },
          [](const Spec& s) {
            std::string text;
            for (const auto& [name, kind] : maskKindNames())
              if (s.masks.has(kind))
                text += (text.empty() ? "" : "+") + std::string(name);
            return text.empty() ? std::string("none") : text;
          }};
}

SpecKey seedKey() {
  std::string allowed = "an unsigned 64-bit integer";
  return {"seed",
          ValueKind::Integer,
          allowed,
          "dropout > 0, bigbird random blocks, favor, or philox() in score_mod/mask_mod",
          "key of the counter-based RNG: dropout masks, BigBird random blocks, the expressions' "
          "philox() draws; for favor, the tools draw the omega tensor from it",
          [](const Spec& s) { return s.needsSeed(); },
          [=](Spec& s, std::string_view value) {
            uint64_t v = 0;
            auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
            if (ec != std::errc() || end != value.data() + value.size())
              badValue("seed", value, allowed);
            s.seed = v;
          },
          [](const Spec& s) { return std::to_string(s.seed.value_or(0)); }};
}

bool isScoreVariant(const Spec& s) {
  return s.variant == Variant::Sdpa || s.variant == Variant::Mha ||
         s.variant == Variant::Additive || s.variant == Variant::Bilinear;
}

// score_mod or mask_mod: kept as text until every key is parsed (resolveExpressions).
SpecKey expressionKey(std::string_view name, SpecExpression Spec::*field, std::string allowed,
                      std::string_view help) {
  return {name,
          ValueKind::Text,
          std::move(allowed),
          "variant=sdpa|mha|additive|bilinear",
          help,
          [=](const Spec& s) { return isScoreVariant(s) && (s.*field).given(); },
          [=](Spec& s, std::string_view value) { s.*field = {std::string(value), nullptr}; },
          [=](const Spec& s) { return (s.*field).text; }};
}

// params and aux: declared for the expressions, so they need one.
bool readByExpressions(const Spec& s) {
  return isScoreVariant(s) && (s.scoreMod.given() || s.maskMod.given());
}

std::vector<SpecKey> buildKeys() {
  auto always = [](const Spec&) { return true; };
  auto is = [](Variant v) { return [v](const Spec& s) { return s.variant == v; }; };
  auto hasMask = [](MaskKind k) { return [k](const Spec& s) { return s.masks.has(k); }; };
  auto hasRope = [](const Spec& s) { return s.rope; };
  auto bigbird = hasMask(MaskKind::BigBird);
  // Kernels compute in f32 (FlashAttention's recipe): a factor they multiply or divide by must
  // be a normal f32, neither rounded to infinity nor flushed to zero.
  constexpr double kMinF32 = std::numeric_limits<float>::min();
  constexpr double kMaxF32 = std::numeric_limits<float>::max();
  const std::string f32Range = "a normal f32 number: at least 1.1754944e-38, below 3.4028235e38";

  std::vector<SpecKey> keys = {
      {"aux", ValueKind::Text, "name:i32|f32[dims] ... (dims: B Tq Tk heads kv_heads or integers)",
       "score_mod or mask_mod", "run-time tensors the expressions index; kernel inputs by name",
       [](const Spec& s) { return readByExpressions(s) && !s.aux.empty(); },
       [](Spec& s, std::string_view value) { s.aux = parseAux(value); },
       [](const Spec& s) { return printAux(s.aux); }},
      booleanKey("alibi", &Spec::alibi, "variant=sdpa|mha|additive|bilinear", isScoreVariant,
                 "add ALiBi's -slope_h * |qpos - j| to the scores (qpos: see causal_align)"),
      listedOnlyWhenSet(booleanKey(
          "backward", &Spec::backward, "kv_cache=none", [](const Spec& s) { return !s.cached(); },
          "the bundle also holds the backward entry: from grad_o, the gradient of every input, "
          "weight, bias, sink and float aux tensor (needs lse=true but for variant=linear)")),
      booleanKey("bias", &Spec::bias, "variant=sdpa|mha|additive|bilinear", isScoreVariant,
                 "add a run-time bias tensor [B|1, H|1, Tq, Tk] to the scores"),
      integerKey(
          "block", &Spec::block, 1, 4096, "mask includes block_sparse or bigbird",
          [](const Spec& s) {
            return s.masks.has(MaskKind::BlockSparse) || s.masks.has(MaskKind::BigBird);
          },
          "block size of block_sparse and bigbird"),
      nameKey(
          "causal_align", &Spec::causalAlign, causalAlignNames(),
          "a position-dependent mask or modifier", [](const Spec& s) { return s.usesAlignment(); },
          "where query rows sit among keys when Tq != Tk"),
      integerKey("d_attn", &Spec::dAttn, 1, kMaxDim, "variant=additive", is(Variant::Additive),
                 "hidden size of the additive score (W1, W2: d_attn x d)"),
      integerKey("d_k", &Spec::dK, 1, kMaxDim, "always", always, "key (and query) head dim"),
      integerKey("d_model", &Spec::dModel, 1, kMaxDim, "variant=mha", is(Variant::Mha),
                 "model width of mha's inputs and output"),
      integerKey(
          "d_q", &Spec::dQ, 1, kMaxDim, "variant=additive|bilinear",
          [](const Spec& s) {
            return s.variant == Variant::Additive || s.variant == Variant::Bilinear;
          },
          "query dim when it differs from d_k"),
      integerKey("d_v", &Spec::dV, 1, kMaxDim, "always", always, "value head dim"),
      integerKey("dilation", &Spec::dilation, 1, kMaxLength, "mask includes dilated",
                 hasMask(MaskKind::Dilated), "gap between attended keys of the dilated window"),
      realKey(
          "dropout", &Spec::dropout, 0, true, 1, "a probability in [0, 1)",
          "variant other than linear", [](const Spec& s) { return s.variant != Variant::Linear; },
          "drop probability of attention weights (needs seed)"),
      nameKey("dtype", &Spec::dtype, dtypeNames(), "always", always,
              "storage type of q, k, v, o (accumulation is f32 or better)"),
      nameKey("feature_map", &Spec::featureMap, featureMapNames(), "variant=linear",
              is(Variant::Linear), "linear attention's feature map"),
      integerKey(
          "features", &Spec::features, 1, kMaxDim, "feature_map=favor",
          [](const Spec& s) {
            return s.variant == Variant::Linear && s.featureMap == FeatureMap::Favor;
          },
          "number of FAVOR+ random features"),
      integerKey("global_blocks", &Spec::globalBlocks, 0, 4096, "mask includes bigbird", bigbird,
                 "BigBird global blocks, rows and columns: the first ceil(g/2) and last "
                 "floor(g/2)"),
      integerKey("global_tokens", &Spec::globalTokens, 1, kMaxLength, "mask includes global",
                 hasMask(MaskKind::Global),
                 "queries with qpos < N attend to every key, and keys j < N to every query"),
      integerKey("heads", &Spec::heads, 1, kMaxHeads, "always", always, "query heads"),
      listedOnlyWhenSet(booleanKey(
          "kv_append", &Spec::kvAppend, "kv_cache=contiguous|paged",
          [](const Spec& s) { return s.cached(); },
          "k_new, v_new (a row per query row) written into the cache at the query rows' "
          "positions before attending: rotated by rope, quantised for kv_dtype=int8 or "
          "fp8_e4m3")),
      listedOnlyWhenSet(nameKey(
          "kv_cache", &Spec::kvCache, kvCacheNames(), "variant=sdpa", is(Variant::Sdpa),
          "keys and values in a KV cache: seq_lens [B] keys per sequence, queries at its end")),
      listedOnlyWhenSet(nameKey(
          "kv_dtype", &Spec::kvDtype, kvDTypeNames(), "kv_cache=contiguous|paged",
          [](const Spec& s) { return s.cached(); },
          "the cache's elements: the spec's dtype (same), or int8 or fp8_e4m3 (OCP E4M3 bytes "
          "as u8) with k_scale, v_scale f32 per position and KV head")),
      integerKey("kv_heads", &Spec::kvHeads, 1, kMaxHeads, "always", always,
                 "key/value heads (GQA/MQA); must divide heads"),
      nameKey(
          "layout", &Spec::layout, layoutNames(), "variant other than mha",
          [](const Spec& s) { return s.variant != Variant::Mha; }, "dimension order of q, k, v, o"),
      booleanKey(
          "lse", &Spec::lse, "variant other than linear",
          [](const Spec& s) { return s.variant != Variant::Linear; },
          "also return the log-sum-exp of each score row [B, H, Tq]"),
      maskKey(),
      expressionKey("mask_mod", &Spec::maskMod, "a bool expression (docs/spec.md, Expressions)",
                    "keep score (b, h, q_idx, kv_idx) where true; intersects mask"),
      nameKey(
          "page_layout", &Spec::pageLayout, pageLayoutNames(), "kv_cache=paged",
          [](const Spec& s) { return s.kvCache == KvCache::Paged; },
          "a page's order: nhd [page_size, kv_heads, d] or hnd [kv_heads, page_size, d]"),
      integerKey(
          "page_size", &Spec::pageSize, 1, 65536, "kv_cache=paged",
          [](const Spec& s) { return s.kvCache == KvCache::Paged; },
          "rows per page of k_pages and v_pages"),
      {"params", ValueKind::Text, "name=number ... (an integer within 32 bits or a real)",
       "score_mod or mask_mod", "named scalars the expressions read",
       [](const Spec& s) { return readByExpressions(s) && !s.params.empty(); },
       [](Spec& s, std::string_view value) { s.params = parseParams(value); },
       [](const Spec& s) { return printParams(s.params); }},
      nameKey("pe", &Spec::pe, positionalEncodingNames(), "variant=mha", is(Variant::Mha),
              "positional encoding added to mha's inputs"),
      integerKey("proj_len", &Spec::projLen, 1, kMaxLength, "variant=linformer",
                 is(Variant::Linformer), "Linformer's projected sequence length k"),
      integerKey("random_blocks", &Spec::randomBlocks, 0, 4096, "mask includes bigbird", bigbird,
                 "BigBird random key blocks per query block (needs seed)"),
      listedOnlyWhenSet(booleanKey(
          "ragged_q", &Spec::raggedQueries, "kv_cache=contiguous|paged",
          [](const Spec& s) { return s.cached(); },
          "queries packed: q, o [total_q, heads, d] with cu_seqlens_q [B+1] i32, sequence b's "
          "rows [cu_seqlens_q[b], cu_seqlens_q[b+1]) at the end of its seq_lens[b] keys")),
      booleanKey(
          "rope", &Spec::rope, "variant=sdpa|mha",
          [](const Spec& s) { return s.variant == Variant::Sdpa || s.variant == Variant::Mha; },
          "rotary position embedding on q and k"),
      integerKey("rope_dims", &Spec::ropeDims, 2, kMaxDim, "rope=true", hasRope,
                 "leading head dims that RoPE rotates (even, at most d_k)"),
      nameKey("rope_style", &Spec::ropeStyle, ropeStyleNames(), "rope=true", hasRope,
              "which dims RoPE pairs"),
      realKey("rope_theta", &Spec::ropeTheta, kMinF32, true, kMaxF32, f32Range, "rope=true",
              hasRope, "RoPE base"),
      listedOnlyWhenSet(booleanKey(
          "save_projections", &Spec::saveProjections, "variant=mha",
          [](const Spec& s) { return s.variant == Variant::Mha; },
          "mha: the forward also returns Q, K, V [B, T, heads d] and the heads' output before "
          "W_O [B, Tq, H d_v] (q_proj, k_proj, v_proj, o_heads, f32), which the backward reads "
          "in place of recomputing them")),
      realKey(
          "scale", &Spec::scale, kMinF32, true, kMaxF32, f32Range,
          "variant other than linear with elu1/relu",
          [](const Spec& s) {
            return s.variant != Variant::Linear || s.featureMap == FeatureMap::Favor;
          },
          "score scale (default 1/sqrt(d_k); 1 for additive and bilinear)"),
      expressionKey("score_mod", &Spec::scoreMod,
                    "a number expression that may read score (docs/spec.md, Expressions)",
                    "replaces each score after scale, softcap, ALiBi and bias"),
      seedKey(),
      listedOnlyWhenSet(booleanKey(
          "sinks", &Spec::sinks, "variant other than linear",
          [](const Spec& s) { return s.variant != Variant::Linear; },
          "a learned logit per head, sinks [heads] f32, in every row's softmax denominator")),
      realKey(
          "softcap", &Spec::softcap, kMinF32, true, kMaxF32, "0 (off) or " + f32Range,
          "variant other than linear", [](const Spec& s) { return s.variant != Variant::Linear; },
          "cap * tanh(score / cap)", /*zeroIsOff=*/true),
      integerKey("stride", &Spec::stride, 1, kMaxLength, "mask includes strided",
                 hasMask(MaskKind::Strided),
                 "strided pattern: keys j with (qpos - j) mod stride = 0"),
      nameKey("variant", &Spec::variant, variantNames(), "always", always, "the attention variant"),
      booleanKey("weights", &Spec::weights, "always", always,
                 "also return the normalised attention weights [B, H, Tq, Tk] (linformer: "
                 "proj_len keys)"),
      integerKey("window_blocks", &Spec::windowBlocks, 1, 4095, "mask includes bigbird", bigbird,
                 "BigBird window width in blocks (odd)"),
      integerKey(
          "window_left", &Spec::windowLeft, 0, kMaxLength, "mask includes window or dilated",
          [](const Spec& s) {
            return s.masks.has(MaskKind::Window) || s.masks.has(MaskKind::Dilated);
          },
          "keys up to this far before the query (dilated: in steps of dilation)"),
      integerKey(
          "window_right", &Spec::windowRight, 0, kMaxLength, "mask includes window or dilated",
          [](const Spec& s) {
            return s.masks.has(MaskKind::Window) || s.masks.has(MaskKind::Dilated);
          },
          "keys up to this far after the query"),
  };
  std::sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return keys;
}

} // namespace

std::span<const SpecKey> specKeys() {
  static const std::vector<SpecKey> keys = buildKeys();
  return keys;
}

const SpecKey* findSpecKey(std::string_view name) {
  for (const SpecKey& key : specKeys())
    if (key.name == name)
      return &key;
  return nullptr;
}

bool listed(const SpecKey& key, const Spec& spec) {
  return key.applies(spec) && (!key.listedOnlyWhenSet || key.print(spec) != key.print(Spec()));
}

std::vector<std::string_view> specWords(std::string_view text) {
  std::vector<std::string_view> result;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])))
      ++i;
    const size_t start = i;
    bool quoted = false;
    size_t openedAt = 0;
    while (i < text.size() && (quoted || !std::isspace(static_cast<unsigned char>(text[i])))) {
      if (text[i] == '"') {
        quoted = !quoted;
        openedAt = i;
      }
      ++i;
    }
    if (quoted)
      throw SpecError("the quote at column " + std::to_string(openedAt + 1) +
                      " is not closed: '" + std::string(text.substr(start)) + "'");
    if (i > start)
      result.push_back(text.substr(start, i - start));
  }
  return result;
}

} // namespace attnc
