// Real models' attentions by name: `preset=llama3-8b` (any key may follow to override).
#ifndef ATTNC_COMPILER_SPEC_PRESETS_H
#define ATTNC_COMPILER_SPEC_PRESETS_H

#include <span>
#include <string_view>

namespace attnc {

struct Preset {
  std::string_view name;
  std::string_view spec;   // keys that do not apply after an override are dropped
  std::string_view source; // where the configuration comes from
};

std::span<const Preset> presets();
const Preset* findPreset(std::string_view name);

} // namespace attnc

#endif // ATTNC_COMPILER_SPEC_PRESETS_H
