#include "Backends/Coverage.h"

#include "Spec/SpecNames.h"

#include <algorithm>

namespace attnc {
namespace {

constexpr Modifier kModifiers[] = {Modifier::Alibi,   Modifier::Softcap,  Modifier::Bias,
                                   Modifier::Rope,    Modifier::Dropout,  Modifier::ScoreMod,
                                   Modifier::MaskMod, Modifier::Sinks,
                                   Modifier::ContiguousKvCache, Modifier::PagedKvCache,
                                   Modifier::Int8KvCache, Modifier::Fp8KvCache,
                                   Modifier::KvAppend};
constexpr Output kOutputs[] = {Output::O,        Output::Lse,          Output::Weights,
                               Output::Backward, Output::AuxGradients, Output::SavedProjections};

// Every value the spec's name table (SpecNames.cpp) knows, so a new variant, mask or dtype is
// in every full row without a change here.
template <class E>
std::vector<E> everyValue(NameTable<E> table) {
  std::vector<E> values;
  for (const auto& [name, value] : table)
    if (std::find(values.begin(), values.end(), value) == values.end())
      values.push_back(value);
  return values;
}

std::string_view modifierName(Modifier m) {
  switch (m) {
  case Modifier::Alibi: return "alibi";
  case Modifier::Softcap: return "softcap";
  case Modifier::Bias: return "bias";
  case Modifier::Rope: return "rope";
  case Modifier::Dropout: return "dropout";
  case Modifier::ScoreMod: return "score_mod";
  case Modifier::MaskMod: return "mask_mod";
  case Modifier::Sinks: return "sinks";
  case Modifier::ContiguousKvCache: return "kv_cache=contiguous";
  case Modifier::PagedKvCache: return "kv_cache=paged";
  case Modifier::Int8KvCache: return "kv_dtype=int8";
  case Modifier::Fp8KvCache: return "kv_dtype=fp8_e4m3";
  case Modifier::KvAppend: return "kv_append";
  }
  return "?";
}

std::string_view outputName(Output o) {
  switch (o) {
  case Output::O: return "o";
  case Output::Lse: return "lse";
  case Output::Weights: return "weights";
  case Output::Backward: return "backward";
  case Output::AuxGradients: return "aux_gradients";
  case Output::SavedProjections: return "save_projections";
  }
  return "?";
}

std::vector<Modifier> modifiersOf(const Spec& s) {
  std::vector<Modifier> used;
  if (s.alibi)
    used.push_back(Modifier::Alibi);
  if (s.softcap > 0)
    used.push_back(Modifier::Softcap);
  if (s.bias)
    used.push_back(Modifier::Bias);
  if (s.rope)
    used.push_back(Modifier::Rope);
  if (s.dropout > 0)
    used.push_back(Modifier::Dropout);
  if (s.scoreMod.given())
    used.push_back(Modifier::ScoreMod);
  if (s.maskMod.given())
    used.push_back(Modifier::MaskMod);
  if (s.sinks)
    used.push_back(Modifier::Sinks);
  if (s.kvCache == KvCache::Contiguous)
    used.push_back(Modifier::ContiguousKvCache);
  if (s.kvCache == KvCache::Paged)
    used.push_back(Modifier::PagedKvCache);
  if (s.kvDtype == KvDType::Int8)
    used.push_back(Modifier::Int8KvCache);
  if (s.kvDtype == KvDType::Fp8E4m3)
    used.push_back(Modifier::Fp8KvCache);
  if (s.kvAppend)
    used.push_back(Modifier::KvAppend);
  return used;
}

// Whether the spec has float aux tensors, whose gradients a backward entry writes.
bool hasFloatAux(const Spec& spec) {
  return std::any_of(spec.aux.begin(), spec.aux.end(),
                     [](const AuxTensor& a) { return a.elementType == expr::Type::Float; });
}

std::vector<Output> outputsOf(const Spec& s) {
  std::vector<Output> used{Output::O};
  if (s.lse)
    used.push_back(Output::Lse);
  if (s.weights)
    used.push_back(Output::Weights);
  if (s.backward)
    used.push_back(Output::Backward);
  if (s.backward && hasFloatAux(s))
    used.push_back(Output::AuxGradients);
  if (s.saveProjections)
    used.push_back(Output::SavedProjections);
  return used;
}

template <class T> bool listed(const std::vector<T>& list, T value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

template <class T, class Name>
std::vector<std::string> names(const std::vector<T>& list, Name name) {
  std::vector<std::string> out;
  for (T value : list)
    out.emplace_back(name(value));
  return out;
}

std::string joined(const std::vector<std::string>& items) {
  std::string text;
  for (const std::string& item : items)
    text += (text.empty() ? "" : " ") + item;
  return text.empty() ? "none" : text;
}

} // namespace

Coverage fullCoverage(Device device) {
  return {device,
          everyValue(variantNames()),
          everyValue(maskKindNames()),
          {std::begin(kModifiers), std::end(kModifiers)},
          {std::begin(kOutputs), std::end(kOutputs)},
          everyValue(dtypeNames()),
          {},
          {},
          "",
          ""};
}

std::optional<std::string> firstGap(const Coverage& row, const Spec& spec) {
  if (!listed(row.variants, spec.variant))
    return "variant=" + std::string(variantName(spec.variant));
  for (unsigned k = 0; k < static_cast<unsigned>(MaskKind::Count); ++k)
    if (spec.masks.has(static_cast<MaskKind>(k)) && !listed(row.masks, static_cast<MaskKind>(k)))
      return "mask=" + std::string(maskKindName(static_cast<MaskKind>(k)));
  for (Modifier m : modifiersOf(spec))
    if (!listed(row.modifiers, m))
      return std::string(modifierName(m));
  for (Output o : outputsOf(spec))
    if (!listed(row.outputs, o))
      return o == Output::Backward           ? "backward=true"
             : o == Output::AuxGradients     ? "the gradients of float aux tensors (backward=true)"
             : o == Output::SavedProjections ? "save_projections=true"
                                             : std::string(outputName(o)) + " output";
  if (!listed(row.dtypes, spec.dtype))
    return "dtype=" + std::string(dtypeName(spec.dtype));
  return std::nullopt;
}

size_t coveredOutputs(const Coverage& row, const Spec& spec) {
  const std::vector<Output> outputs = outputsOf(spec);
  return std::count_if(outputs.begin(), outputs.end(),
                       [&](Output o) { return listed(row.outputs, o); });
}

bool defersToAnother(const Coverage& row, const Spec& spec) {
  return std::any_of(row.elementwiseMasks.begin(), row.elementwiseMasks.end(),
                     [&](MaskKind k) { return spec.masks.has(k); });
}

std::string_view gapReason(const Coverage& row, std::string_view gap) {
  for (const Coverage::GapReason& r : row.gapReasons)
    if (gap.starts_with(r.gaps))
      return r.why;
  return "";
}

std::string describeCoverage(const Coverage& row) {
  return "variants " + joined(names(row.variants, variantName)) + "; masks " +
         joined(names(row.masks, maskKindName)) + "; modifiers " +
         joined(names(row.modifiers, modifierName)) + "; outputs " +
         joined(names(row.outputs, outputName)) + "; dtypes " +
         joined(names(row.dtypes, dtypeName));
}

nlohmann::json coverageJson(const Coverage& row) {
  nlohmann::json json = {{"family", deviceName(row.device)},
                         {"variants", names(row.variants, variantName)},
                         {"masks", names(row.masks, maskKindName)},
                         {"modifiers", names(row.modifiers, modifierName)},
                         {"outputs", names(row.outputs, outputName)},
                         {"dtypes", names(row.dtypes, dtypeName)}};
  if (!row.elementwiseMasks.empty())
    json["elementwise_masks"] = names(row.elementwiseMasks, maskKindName);
  for (const Coverage::GapReason& r : row.gapReasons)
    json["gap_reasons"][std::string(r.gaps)] = r.why;
  if (!row.decode.empty())
    json["decode"] = row.decode;
  if (!row.products.empty())
    json["products"] = row.products;
  return json;
}

} // namespace attnc
