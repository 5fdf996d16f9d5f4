// Spec text: any input is parsed or refused with a SpecError, and what parses round-trips
// through its canonical form (the form that names artifacts and keys tuning records).
#include "Spec/Spec.h"

#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  attnc::Spec spec;
  try {
    spec = attnc::parseSpec(text);
  } catch (const attnc::SpecError&) {
    return 0;
  }
  const std::string canonical = spec.canonical();
  if (attnc::parseSpec(canonical).canonical() != canonical ||
      attnc::parseSpecJson(spec.toJson()).canonical() != canonical)
    std::abort(); // a spec whose canonical form or JSON does not parse back to itself
  return 0;
}
