#include "Spec/Spec.h"

#include "Expr/ExprParse.h"
#include "Spec/SpecKeys.h"
#include "attnc/Hash.hpp"

#include <charconv>
#include <nlohmann/json.hpp>

namespace attnc {

bool MaskSet::hasSparsityPattern() const {
  for (MaskKind k : kSparsityPatterns)
    if (has(k))
      return true;
  return false;
}

bool SpecExpression::draws() const {
  return expr::mentionsName(text, "philox");
}

bool Spec::needsSeed() const {
  return dropout > 0 || (masks.has(MaskKind::BigBird) && randomBlocks > 0) ||
         (variant == Variant::Linear && featureMap == FeatureMap::Favor) || scoreMod.draws() ||
         maskMod.draws();
}

bool Spec::usesAlignment() const {
  for (MaskKind k :
       {MaskKind::Causal, MaskKind::Window, MaskKind::Global, MaskKind::Strided, MaskKind::Dilated})
    if (masks.has(k))
      return true;
  return alibi || rope || (variant == Variant::Mha && pe != PositionalEncoding::None) ||
         scoreMod.given() || maskMod.given(); // qpos
}

Spec Spec::unragged() const {
  Spec one = *this;
  one.raggedQueries = false;
  return one;
}

Spec Spec::kernelSpec() const {
  Spec kernel = unragged();
  kernel.kvAppend = false;
  return kernel;
}

std::string Spec::canonical() const {
  std::string text;
  for (const SpecKey& key : specKeys())
    if (listed(key, *this))
      text += (text.empty() ? "" : " ") + std::string(key.name) + "=" +
              (key.kind == ValueKind::Text ? "\"" + key.print(*this) + "\"" : key.print(*this));
  return text;
}

nlohmann::json Spec::toJson() const {
  nlohmann::json object = nlohmann::json::object();
  for (const SpecKey& key : specKeys()) {
    if (!listed(key, *this))
      continue;
    std::string text = key.print(*this);
    switch (key.kind) {
    case ValueKind::Integer:
      object[key.name] =
          nlohmann::json(std::stoull(text)); // every integer key is >= 0; seed needs all 64 bits
      break;
    case ValueKind::Real: {
      double value = 0; // the printer wrote the shortest text that parses back to the value
      std::from_chars(text.data(), text.data() + text.size(), value);
      object[key.name] = value;
      break;
    }
    case ValueKind::Boolean: object[key.name] = text == "true"; break;
    case ValueKind::Name:
    case ValueKind::Text: object[key.name] = text; break;
    case ValueKind::Mask: {
      nlohmann::json patterns = nlohmann::json::array();
      size_t start = 0;
      while (text != "none" && start <= text.size()) {
        size_t plus = text.find('+', start);
        patterns.push_back(text.substr(start, plus - start));
        if (plus == std::string::npos)
          break;
        start = plus + 1;
      }
      object[key.name] = patterns;
      break;
    }
    }
  }
  return object;
}

std::string Spec::hash() const {
  return fnv1a64Hex(canonical());
}

} // namespace attnc
