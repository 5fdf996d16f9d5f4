// Spec JSON: any text is parsed or refused with a SpecError (repeated keys, syntax errors with
// their line and column, wrong value types), and what parses round-trips through its JSON.
#include "Spec/Spec.h"

#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  attnc::Spec spec;
  try {
    spec = attnc::parseSpecJson(attnc::parseJsonObjectStrictly(text, "input"));
  } catch (const attnc::SpecError&) {
    return 0;
  }
  if (attnc::parseSpecJson(spec.toJson()).canonical() != spec.canonical())
    std::abort();
  return 0;
}
