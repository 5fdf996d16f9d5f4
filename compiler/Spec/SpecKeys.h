// The table of spec keys: one entry per key, with its parser, printer and the condition under
// which it applies. Parsing, validation, the canonical form, JSON and `attnc spec --keys` all
// iterate this table, so a new key is added in one place.
#ifndef ATTNC_COMPILER_SPEC_SPECKEYS_H
#define ATTNC_COMPILER_SPEC_SPECKEYS_H

#include "Spec/Spec.h"

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace attnc {

// Text: a quoted value in spec text (score_mod="kv_idx <= qpos"), a string in JSON.
enum class ValueKind { Integer, Real, Boolean, Name, Mask, Text };

// The largest head, model and feature dim a spec may have.
inline constexpr int64_t kMaxDim = 65536;

struct SpecKey {
  std::string_view name;
  ValueKind kind;
  std::string allowed;          // "an integer in [1, 4096]", "one of: f32 f16 bf16"
  std::string_view appliesWhen; // "always", "variant=mha", ...
  std::string_view help;
  std::function<bool(const Spec&)> applies;
  std::function<void(Spec&, std::string_view)> parse; // throws SpecError
  std::function<std::string(const Spec&)> print;
  // Listed in the canonical form and JSON only when its value is not the default's: a key added
  // after spec hashes were pinned (tuning databases and artifact names hold them), so a spec
  // that does not use it keeps the hash it had before the key existed.
  bool listedOnlyWhenSet = false;
};

// Whether the canonical form and JSON list `key` for `spec`.
bool listed(const SpecKey& key, const Spec& spec);

// Sorted by name; the canonical form follows this order.
std::span<const SpecKey> specKeys();
const SpecKey* findSpecKey(std::string_view name);

// The words of a spec's text, or of a key's list value (params="cap=30 width=128"), split at
// spaces outside double quotes; an unclosed quote is a SpecError.
std::vector<std::string_view> specWords(std::string_view text);

} // namespace attnc

#endif // ATTNC_COMPILER_SPEC_SPECKEYS_H
