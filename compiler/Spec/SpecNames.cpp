#include "Spec/SpecNames.h"

#include <array>

namespace attnc {
namespace {

using namespace std::literals;

constexpr std::array kVariants{
    std::pair{"sdpa"sv, Variant::Sdpa},         std::pair{"mha"sv, Variant::Mha},
    std::pair{"additive"sv, Variant::Additive}, std::pair{"bilinear"sv, Variant::Bilinear},
    std::pair{"linear"sv, Variant::Linear},     std::pair{"linformer"sv, Variant::Linformer}};
constexpr std::array kDTypes{std::pair{"f32"sv, DType::F32}, std::pair{"f16"sv, DType::F16},
                             std::pair{"bf16"sv, DType::BF16}};
constexpr std::array kLayouts{std::pair{"bhsd"sv, Layout::Bhsd}, std::pair{"bshd"sv, Layout::Bshd}};
constexpr std::array kKvCaches{std::pair{"none"sv, KvCache::None},
                               std::pair{"contiguous"sv, KvCache::Contiguous},
                               std::pair{"paged"sv, KvCache::Paged}};
constexpr std::array kPageLayouts{std::pair{"nhd"sv, PageLayout::Nhd},
                                  std::pair{"hnd"sv, PageLayout::Hnd}};
constexpr std::array kKvDTypes{std::pair{"same"sv, KvDType::Same},
                               std::pair{"int8"sv, KvDType::Int8},
                               std::pair{"fp8_e4m3"sv, KvDType::Fp8E4m3}};
constexpr std::array kAligns{std::pair{"top_left"sv, CausalAlign::TopLeft},
                             std::pair{"bottom_right"sv, CausalAlign::BottomRight}};
constexpr std::array kFeatureMaps{std::pair{"elu1"sv, FeatureMap::Elu1},
                                  std::pair{"relu"sv, FeatureMap::Relu},
                                  std::pair{"favor"sv, FeatureMap::Favor}};
constexpr std::array kRopeStyles{std::pair{"half"sv, RopeStyle::Half},
                                 std::pair{"interleaved"sv, RopeStyle::Interleaved}};
constexpr std::array kPositional{std::pair{"none"sv, PositionalEncoding::None},
                                 std::pair{"sinusoidal"sv, PositionalEncoding::Sinusoidal}};
// In MaskKind order: the canonical form lists patterns in this order.
constexpr std::array kMaskKinds{std::pair{"causal"sv, MaskKind::Causal},
                                std::pair{"padding"sv, MaskKind::Padding},
                                std::pair{"window"sv, MaskKind::Window},
                                std::pair{"global"sv, MaskKind::Global},
                                std::pair{"strided"sv, MaskKind::Strided},
                                std::pair{"dilated"sv, MaskKind::Dilated},
                                std::pair{"block_sparse"sv, MaskKind::BlockSparse},
                                std::pair{"bigbird"sv, MaskKind::BigBird},
                                std::pair{"tensor"sv, MaskKind::Tensor}};
static_assert(kMaskKinds.size() == static_cast<size_t>(MaskKind::Count));

} // namespace

NameTable<Variant> variantNames() {
  return kVariants;
}
NameTable<DType> dtypeNames() {
  return kDTypes;
}
NameTable<Layout> layoutNames() {
  return kLayouts;
}
NameTable<KvCache> kvCacheNames() {
  return kKvCaches;
}
NameTable<PageLayout> pageLayoutNames() {
  return kPageLayouts;
}
NameTable<KvDType> kvDTypeNames() {
  return kKvDTypes;
}
NameTable<CausalAlign> causalAlignNames() {
  return kAligns;
}
NameTable<FeatureMap> featureMapNames() {
  return kFeatureMaps;
}
NameTable<RopeStyle> ropeStyleNames() {
  return kRopeStyles;
}
NameTable<PositionalEncoding> positionalEncodingNames() {
  return kPositional;
}
NameTable<MaskKind> maskKindNames() {
  return kMaskKinds;
}

std::string_view variantName(Variant v) {
  return nameOf(variantNames(), v);
}
std::string_view dtypeName(DType d) {
  return nameOf(dtypeNames(), d);
}
std::string_view maskKindName(MaskKind k) {
  return nameOf(maskKindNames(), k);
}

} // namespace attnc
