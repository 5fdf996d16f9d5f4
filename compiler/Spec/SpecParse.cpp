// Spec text and JSON in, validated Spec out.
#include "Spec/Presets.h"
#include "Spec/Spec.h"
#include "Spec/SpecExpressions.h"
#include "Spec/SpecKeys.h"
#include "Spec/SpecNames.h"
#include "Support/Errors.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace attnc {
namespace {

struct Entry {
  std::string value;
  const Preset* preset = nullptr; // set when the value came from a preset, not the user
};
using Entries = std::map<std::string, Entry, std::less<>>;

std::string knownKeys() {
  std::string names = "preset";
  for (const SpecKey& key : specKeys())
    names += " " + std::string(key.name);
  return names;
}

std::string presetNames() {
  std::string names;
  for (const Preset& p : presets())
    names += (names.empty() ? "" : " ") + std::string(p.name);
  return names;
}

void splitPair(std::string_view token, std::string_view& key, std::string_view& value) {
  size_t eq = token.find('=');
  if (eq == std::string_view::npos || eq == 0)
    throw SpecError("'" + std::string(token) + "' is not key=value; known keys: " + knownKeys());
  key = token.substr(0, eq);
  value = token.substr(eq + 1);
  // A quoted value (score_mod="kv_idx <= qpos") may hold spaces; specWords() kept it whole.
  if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
    value = value.substr(1, value.size() - 2);
  if (value.empty())
    throw SpecError(std::string(key) + "= has no value");
}

// Inserts a preset's keys under the user's: a user key always wins.
void expandPreset(std::string_view name, Entries& entries) {
  const Preset* preset = findPreset(name);
  if (!preset)
    throw SpecError("preset=" + std::string(name) +
                    ": unknown preset; expected one of: " + presetNames());
  for (std::string_view token : specWords(preset->spec)) {
    std::string_view key, value;
    splitPair(token, key, value);
    entries.try_emplace(std::string(key), Entry{std::string(value), preset});
  }
}

void fillDefaults(Spec& s) {
  if (s.kvHeads == 0)
    s.kvHeads = s.heads;
  if (s.variant == Variant::Mha) {
    if (s.dK == 0 && s.dModel > 0) {
      if (s.dModel % s.heads != 0)
        throw SpecError("d_model=" + std::to_string(s.dModel) +
                        ": without d_k, d_model must be "
                        "a multiple of heads=" +
                        std::to_string(s.heads));
      s.dK = s.dModel / s.heads;
    }
    if (s.dModel == 0)
      s.dModel = s.heads * s.dK;
    // The canonical form states d_model, so it must be a value the parser accepts.
    if (s.dModel > kMaxDim)
      throw SpecError("heads=" + std::to_string(s.heads) + " x d_k=" + std::to_string(s.dK) +
                      " makes d_model=" + std::to_string(s.dModel) + "; at most " +
                      std::to_string(kMaxDim) + " is allowed");
  }
  if (s.dK == 0)
    throw SpecError(s.variant == Variant::Mha ? "d_k or d_model is required"
                                              : "d_k is required (the head dim of keys)");
  if (s.dQ == 0)
    s.dQ = s.dK;
  if (s.dV == 0)
    s.dV = s.dK;
  if (s.dAttn == 0)
    s.dAttn = s.dK;
  if (s.ropeDims == 0)
    s.ropeDims = s.dK;
  if (s.scale == 0)
    s.scale = (s.variant == Variant::Additive || s.variant == Variant::Bilinear)
                  ? 1.0
                  : 1.0 / std::sqrt(static_cast<double>(s.dK));
}

std::string maskText(const Spec& s) {
  return findSpecKey("mask")->print(s);
}

// Rules across keys. Each message names the keys, their values and what is allowed.
void validate(const Spec& s) {
  auto fail = [](const std::string& message) { throw SpecError(message); };
  std::string variant(variantName(s.variant));
  if (s.kvHeads > s.heads || s.heads % s.kvHeads != 0)
    fail("kv_heads=" + std::to_string(s.kvHeads) + " must divide heads=" + std::to_string(s.heads));

  if (s.backward && s.variant != Variant::Linear && !s.lse)
    fail("backward=true: the backward recomputes the softmax from the forward's log-sum-exp, "
         "so the forward must return it: add lse=true");

  MaskSet allowed;
  if (s.variant == Variant::Linear) {
    allowed.add(MaskKind::Causal);
    allowed.add(MaskKind::Padding);
  } else if (s.variant == Variant::Linformer) {
    allowed.add(MaskKind::Padding);
  } else {
    allowed.bits = (1u << static_cast<unsigned>(MaskKind::Count)) - 1;
  }
  if ((s.masks.bits & ~allowed.bits) != 0)
    fail("mask=" + maskText(s) + " is not supported by variant=" + variant +
         "; it allows: " + (s.variant == Variant::Linear ? "none causal padding" : "none padding"));

  if (s.masks.has(MaskKind::Window) && s.masks.has(MaskKind::Dilated))
    fail("mask=" + maskText(s) +
         ": window and dilated share window_left/window_right; "
         "use one of them");
  if ((s.masks.has(MaskKind::Window) || s.masks.has(MaskKind::Dilated)) && s.windowLeft < 0)
    fail("mask=" + maskText(s) + " needs window_left=N (keys before the query)");
  if (s.masks.has(MaskKind::Global) && s.globalTokens == 0)
    fail("mask=" + maskText(s) + " needs global_tokens=N");
  if (s.masks.has(MaskKind::Strided) && s.stride == 0)
    fail("mask=" + maskText(s) + " needs stride=N");
  if (s.masks.has(MaskKind::Dilated) && s.dilation == 0)
    fail("mask=" + maskText(s) + " needs dilation=N");
  if ((s.masks.has(MaskKind::BlockSparse) || s.masks.has(MaskKind::BigBird)) && s.block == 0)
    fail("mask=" + maskText(s) + " needs block=N (the block size)");
  if (s.masks.has(MaskKind::BigBird) && s.windowBlocks % 2 == 0)
    fail("window_blocks=" + std::to_string(s.windowBlocks) +
         " must be odd (the query block and "
         "as many on each side)");

  if (s.needsSeed() && !s.seed) {
    std::string why = s.dropout > 0 ? "dropout=" + findSpecKey("dropout")->print(s)
                      : s.variant == Variant::Linear && s.featureMap == FeatureMap::Favor
                          ? std::string("feature_map=favor")
                      : s.masks.has(MaskKind::BigBird) && s.randomBlocks > 0
                          ? std::string("mask=bigbird with random_blocks > 0")
                          : std::string(s.scoreMod.draws() ? "score_mod" : "mask_mod") +
                                " calling philox()";
    fail(why + " needs seed=N: the random numbers come from a counter-based RNG keyed by seed");
  }
  if (s.rope) {
    if (s.ropeDims % 2 != 0 || s.ropeDims > s.dK)
      fail("rope_dims=" + std::to_string(s.ropeDims) +
           " must be even and at most d_k=" + std::to_string(s.dK));
  }
  if (s.variant == Variant::Mha && s.pe == PositionalEncoding::Sinusoidal && s.dModel % 2 != 0)
    fail("pe=sinusoidal needs an even d_model; d_model=" + std::to_string(s.dModel));
  if (s.variant == Variant::Linformer && s.projLen == 0)
    fail("variant=linformer needs proj_len=N (the projected sequence length)");
  if (s.cached()) {
    const std::string cache = "kv_cache=" + std::string(nameOf(kvCacheNames(), s.kvCache));
    if (s.kvCache == KvCache::Paged && s.pageSize == 0)
      fail(cache + " needs page_size=N (rows per page, as 16 in vLLM)");
    if (s.masks.has(MaskKind::Padding))
      fail(cache + " with mask=" + maskText(s) +
           ": seq_lens already gives each sequence's keys; drop padding");
    if (s.causalAlign == CausalAlign::TopLeft)
      fail(cache + " puts each sequence's query rows at its end (bottom_right); causal_align="
                   "top_left does not apply");
  }
  if (s.raggedQueries) {
    // Sequences run in calls of the kernel of their own (Spec::unragged), where the batch index
    // counts from the call's first sequence: what reads the batch index or the query rows of
    // the whole batch has no meaning there.
    if (s.layout != Layout::Bshd)
      fail("ragged_q=true packs query rows positions first (q [total_q, heads, d_k]); it needs "
           "layout=bshd, which orders a contiguous cache [B, Tk, kv_heads, d] the same way");
    if (s.weights)
      fail("ragged_q=true with weights=true is not supported: the weights [B, H, Tq, Tk] have no "
           "packed form yet");
    if (s.dropout > 0)
      fail("ragged_q=true with dropout is not supported: its draws read the batch index b");
    if (s.bias)
      fail("ragged_q=true with bias=true is not supported: bias [B, H, Tq, Tk] has no packed "
           "form; write the bias as score_mod reading an aux tensor");
    for (MaskKind kind : {MaskKind::Tensor, MaskKind::BlockSparse})
      if (s.masks.has(kind))
        fail("ragged_q=true with mask=" + maskText(s) + ": the " +
             std::string(kind == MaskKind::Tensor ? "mask" : "block_layout") +
             " tensor is shaped by Tq, which differs per sequence; masks allowed: causal, window, "
             "global, strided, dilated, bigbird, or mask_mod");
  }
}

Spec buildSpec(Entries entries) {
  while (true) {
    Spec spec;
    for (const auto& [name, entry] : entries) {
      const SpecKey* key = findSpecKey(name);
      if (!key)
        throw SpecError("unknown key '" + name + "'; known keys: " + knownKeys());
      key->parse(spec, entry.value);
    }
    // A preset's key that an override made moot is dropped; a user's key is an error.
    bool dropped = false;
    for (auto it = entries.begin(); it != entries.end();) {
      const SpecKey* key = findSpecKey(it->first);
      if (key->applies(spec)) {
        ++it;
      } else if (it->second.preset) {
        it = entries.erase(it);
        dropped = true;
      } else {
        throw SpecError(it->first + "=" + it->second.value + " does not apply here: " + it->first +
                        " needs " + std::string(key->appliesWhen) +
                        " (this spec has "
                        "variant=" +
                        std::string(variantName(spec.variant)) + " mask=" + maskText(spec) + ")");
      }
    }
    if (dropped)
      continue;
    fillDefaults(spec);
    validate(spec);
    resolveExpressions(spec);
    return spec;
  }
}

void addEntry(Entries& entries, std::string_view key, std::string value) {
  if (key != "preset" && !findSpecKey(key))
    throw SpecError("unknown key '" + std::string(key) + "'; known keys: " + knownKeys());
  if (!entries.try_emplace(std::string(key), Entry{std::move(value), nullptr}).second)
    throw SpecError("key '" + std::string(key) + "' is given twice");
}

// Splits the user's keys from `preset`, then lays the preset under them.
Entries withPreset(Entries user) {
  auto preset = user.find("preset");
  if (preset == user.end())
    return user;
  std::string name = preset->second.value;
  user.erase(preset);
  expandPreset(name, user);
  return user;
}

std::string jsonValueText(const std::string& key, const nlohmann::json& value) {
  using nlohmann::json;
  const SpecKey* known = findSpecKey(key);
  const bool wantsText = !known || known->kind == ValueKind::Name ||
                         known->kind == ValueKind::Mask || known->kind == ValueKind::Text;
  switch (value.type()) {
  case json::value_t::string:
    if (!wantsText) // a number in quotes is a mistake to report, not a value to guess at
      throw SpecError(key + ": the JSON string " + value.dump() + " is not allowed; expected " +
                      known->allowed + " as a JSON " +
                      (known->kind == ValueKind::Boolean ? "boolean" : "number"));
    return value.get<std::string>();
  case json::value_t::boolean: return value.get<bool>() ? "true" : "false";
  case json::value_t::number_integer:
  case json::value_t::number_unsigned:
  case json::value_t::number_float: return value.dump();
  case json::value_t::object: {
    if (key != "params") // params may be {"cap": 30, "w": 128}
      break;
    std::string joined;
    for (const auto& [name, number] : value.items()) {
      if (!number.is_number())
        throw SpecError("params: expected an object of names and numbers, got " + value.dump());
      joined += (joined.empty() ? "" : " ") + name + "=" + number.dump();
    }
    return joined;
  }
  case json::value_t::array: {
    if (key != "mask")
      break;
    std::string joined;
    for (const json& item : value) {
      if (!item.is_string())
        throw SpecError("mask: expected an array of pattern names, got " + value.dump());
      joined += (joined.empty() ? "" : "+") + item.get<std::string>();
    }
    return joined.empty() ? "none" : joined;
  }
  default: break;
  }
  throw SpecError(key + ": a JSON " + std::string(value.type_name()) +
                  " is not allowed; expected a string, number or boolean" +
                  (key == "mask"     ? " (or an array of pattern names)"
                   : key == "params" ? " (or an object of names and numbers)"
                                     : ""));
}

} // namespace

Spec parseSpec(std::string_view text) {
  if (auto control = controlCharacter(text))
    throw SpecError("the spec holds " + *control + "; a spec is printable text");
  Entries entries;
  for (std::string_view token : specWords(text)) {
    std::string_view key, value;
    splitPair(token, key, value);
    addEntry(entries, key, std::string(value));
  }
  if (entries.empty())
    throw SpecError("empty spec: give key=value pairs such as 'variant=sdpa heads=8 d_k=64'");
  return buildSpec(withPreset(std::move(entries)));
}

Spec parseSpecJson(const nlohmann::json& object) {
  if (!object.is_object())
    throw SpecError("a JSON spec must be an object of key: value pairs, got a " +
                    std::string(object.type_name()));
  Entries entries;
  for (const auto& [key, value] : object.items()) {
    // Shown escaped: the key and value as JSON.
    if (auto control = controlCharacter(key))
      throw SpecError("the key " + nlohmann::json(key).dump() + " holds " + *control +
                      "; a spec is printable text");
    const std::string text = jsonValueText(key, value);
    if (auto control = controlCharacter(text))
      throw SpecError(key + ": " + value.dump() + " holds " + *control +
                      "; a spec is printable text");
    addEntry(entries, key, text);
  }
  if (entries.empty())
    throw SpecError("empty spec: give keys such as {\"variant\": \"sdpa\", \"d_k\": 64}");
  return buildSpec(withPreset(std::move(entries)));
}

Spec loadSpec(std::string_view textOrPath) {
  if (!textOrPath.ends_with(".json"))
    return parseSpec(textOrPath);
  const std::string path(textOrPath);
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error))
    throw SpecError("cannot read spec file '" + path + "': " +
                    (std::filesystem::exists(path, error) ? "not a regular file"
                                                          : "no such file"));
  // Every spec fits in a few hundred bytes; a huge file is a mistake, never read whole.
  constexpr uintmax_t kMaxSpecFileBytes = 1 << 20;
  if (std::filesystem::file_size(path, error) > kMaxSpecFileBytes)
    throw SpecError("spec file '" + path + "' is larger than " +
                    std::to_string(kMaxSpecFileBytes) + " bytes; a spec is one JSON object");
  std::ifstream file(path);
  if (!file)
    throw SpecError("cannot read spec file '" + path + "'");
  std::stringstream content;
  content << file.rdbuf();
  return parseSpecJson(parseJsonObjectStrictly(content.str(), "spec file '" + path + "'"));
}

nlohmann::json parseJsonObjectStrictly(std::string_view text, const std::string& what) {
  // Keys seen in each open object, innermost last: a repeated key is an error, not "last wins".
  std::vector<std::set<std::string>> open;
  std::string repeated;
  auto refuseRepeats = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start)
      open.emplace_back();
    else if (event == Event::object_end && !open.empty())
      open.pop_back();
    else if (event == Event::key && !open.back().insert(parsed.get<std::string>()).second &&
             repeated.empty())
      repeated = parsed.get<std::string>();
    return true;
  };
  nlohmann::json object;
  try {
    object = nlohmann::json::parse(text, refuseRepeats);
  } catch (const nlohmann::json::exception& e) {
    // A syntax error, or a number past a double (out_of_range): nlohmann's message names the
    // line and column, "parse error at line 2, column 9: ...", after a "[json.exception...]".
    const std::string message = e.what();
    const size_t at = message.find("] ");
    throw SpecError(what + " is not valid JSON: " +
                    (at == std::string::npos ? message : message.substr(at + 2)));
  }
  if (!repeated.empty())
    throw SpecError(what + ": key '" + repeated + "' is given twice");
  return object;
}

} // namespace attnc
