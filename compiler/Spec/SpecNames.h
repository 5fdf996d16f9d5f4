// Spellings of the spec's enumerations, shared by the parser, the printer and the messages.
#ifndef ATTNC_COMPILER_SPEC_SPECNAMES_H
#define ATTNC_COMPILER_SPEC_SPECNAMES_H

#include "Spec/Spec.h"

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace attnc {

template <class E> using NameTable = std::span<const std::pair<std::string_view, E>>;

NameTable<Variant> variantNames();
NameTable<DType> dtypeNames();
NameTable<Layout> layoutNames();
NameTable<KvCache> kvCacheNames();
NameTable<PageLayout> pageLayoutNames();
NameTable<KvDType> kvDTypeNames();
NameTable<CausalAlign> causalAlignNames();
NameTable<FeatureMap> featureMapNames();
NameTable<RopeStyle> ropeStyleNames();
NameTable<PositionalEncoding> positionalEncodingNames();
NameTable<MaskKind> maskKindNames();

template <class E> std::optional<E> lookupName(NameTable<E> table, std::string_view name) {
  for (const auto& [text, value] : table)
    if (text == name)
      return value;
  return std::nullopt;
}

template <class E> std::string_view nameOf(NameTable<E> table, E value) {
  for (const auto& [text, v] : table)
    if (v == value)
      return text;
  return "?";
}

template <class E> std::string joinNames(NameTable<E> table) {
  std::string joined;
  for (const auto& entry : table)
    joined += (joined.empty() ? "" : " ") + std::string(entry.first);
  return joined;
}

} // namespace attnc

#endif // ATTNC_COMPILER_SPEC_SPECNAMES_H
