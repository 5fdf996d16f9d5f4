// Element types by name, as manifests and the CLI spell them ("f32", "bf16", "u8", ...).
#ifndef ATTNC_DTYPE_HPP
#define ATTNC_DTYPE_HPP

#include <cstddef>
#include <dlpack/dlpack.h>
#include <optional>
#include <string>
#include <string_view>

namespace attnc {

struct NamedDType {
  std::string_view name;
  DLDataType dtype;
};

inline constexpr NamedDType kNamedDTypes[] = {
    {"f64", {kDLFloat, 64, 1}},   {"f32", {kDLFloat, 32, 1}}, {"f16", {kDLFloat, 16, 1}},
    {"bf16", {kDLBfloat, 16, 1}}, {"i64", {kDLInt, 64, 1}},   {"i32", {kDLInt, 32, 1}},
    {"i8", {kDLInt, 8, 1}},       {"u8", {kDLUInt, 8, 1}},
};

inline bool sameDType(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

inline std::optional<DLDataType> parseDType(std::string_view name) {
  for (const NamedDType& entry : kNamedDTypes)
    if (entry.name == name)
      return entry.dtype;
  return std::nullopt;
}

inline std::string dtypeName(DLDataType dtype) {
  for (const NamedDType& entry : kNamedDTypes)
    if (sameDType(entry.dtype, dtype))
      return std::string(entry.name);
  return "dtype(code=" + std::to_string(dtype.code) + ",bits=" + std::to_string(dtype.bits) +
         ",lanes=" + std::to_string(dtype.lanes) + ")";
}

inline std::size_t dtypeBytes(DLDataType dtype) {
  return (dtype.bits * dtype.lanes + 7) / 8;
}

} // namespace attnc

#endif // ATTNC_DTYPE_HPP
