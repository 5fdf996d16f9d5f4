//===- Elements.cpp - elements of any storage type as f32 -----------------===//
#include "attn/Kit/Elements.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/TypeUtilities.h"
#include <limits>

using namespace mlir;

namespace attnc::attn {

namespace {

// `type` (a scalar, or a vector of them) with its scalars of type `element`.
Type withElement(Type type, Type element) {
  if (auto vector = dyn_cast<VectorType>(type))
    return vector.cloneWith(std::nullopt, element);
  return element;
}

// E4M3 bits (i8, or a vector of them) as f32, through binary16: E4M3's sign, exponent and
// mantissa bits moved to binary16's places (bits 15, 14-10 with the top exponent bit 0, 9-7) make
// a half of exactly 2^-8 the value, subnormals included (E4M3's m * 2^-9 lands on binary16's
// subnormal m * 2^-17), so one f16 -> f32 conversion (vcvtph2ps, cvt.f32.f16) and a product by
// 256 (left out when not `scaled`) decode it; S.1111.111 is NaN.
Value decodeE4m3(ImplicitLocOpBuilder& b, Value bits, bool scaled) {
  auto like = [&](Type scalar) { return withElement(bits.getType(), scalar); };
  Type i16 = like(b.getIntegerType(16)), f32 = like(b.getF32Type());
  auto constant = [&](Type type, Attribute scalar) -> Value {
    if (auto vector = dyn_cast<VectorType>(type))
      return b.create<arith::ConstantOp>(SplatElementsAttr::get(vector, scalar));
    return b.create<arith::ConstantOp>(cast<TypedAttr>(scalar));
  };
  auto int16 = [&](int64_t v) { return constant(i16, b.getI16IntegerAttr(v)); };
  auto float32 = [&](float v) { return constant(f32, b.getF32FloatAttr(v)); };
  // Sign-extended and shifted by 7, the byte's sign lands on bit 15 and again on bit 14, which
  // the mask clears: (sext(bits) << 7) & 0xBF80 is the half's bits, both signs.
  Value half = b.create<arith::AndIOp>(
      b.create<arith::ShLIOp>(b.create<arith::ExtSIOp>(i16, bits), int16(7)),
      int16(static_cast<int16_t>(0xBF80)));
  Value magnitude = b.create<arith::AndIOp>(half, int16(0x7F80));
  Value value = b.create<arith::ExtFOp>(
      f32, b.create<arith::BitcastOp>(like(b.getF16Type()), half).getResult());
  if (scaled)
    value = b.create<arith::MulFOp>(value, float32(256.0f));
  Value isNaN = b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, magnitude, int16(0x3F80));
  return b.create<arith::SelectOp>(isNaN, float32(std::numeric_limits<float>::quiet_NaN()),
                                   value);
}

// toF32 (scaled) or toF32Unscaled.
Value widen(ImplicitLocOpBuilder& b, Value element, bool scaled) {
  Type type = element.getType(), scalar = getElementTypeOrSelf(type);
  auto like = [&](Type to) { return withElement(type, to); };
  if (scalar.isF32())
    return element;
  if (isa<IntegerType>(scalar))
    return b.create<arith::SIToFPOp>(like(b.getF32Type()), element);
  if (isa<Float8E4M3FNType>(scalar))
    return decodeE4m3(b, b.create<arith::BitcastOp>(like(b.getI8Type()), element), scaled);
  return b.create<arith::ExtFOp>(like(b.getF32Type()), element);
}

} // namespace

Value toF32(ImplicitLocOpBuilder& b, Value element) {
  return widen(b, element, /*scaled=*/true);
}

Value toF32Unscaled(ImplicitLocOpBuilder& b, Value element) {
  return widen(b, element, /*scaled=*/false);
}

Value scaleForUnscaled(ImplicitLocOpBuilder& b, Value scale, Type codes) {
  if (!isa<Float8E4M3FNType>(getElementTypeOrSelf(codes)))
    return scale;
  Attribute factor = b.getF32FloatAttr(256.0f);
  if (auto vector = dyn_cast<VectorType>(scale.getType()))
    factor = SplatElementsAttr::get(vector, factor);
  return b.create<arith::MulFOp>(scale, b.create<arith::ConstantOp>(cast<TypedAttr>(factor)));
}

Value loadF32(ImplicitLocOpBuilder& b, Value buffer, ValueRange indices) {
  return toF32(b, b.create<memref::LoadOp>(buffer, indices));
}

void storeF32(ImplicitLocOpBuilder& b, Value value, Value buffer, ValueRange indices) {
  Type element = cast<MemRefType>(buffer.getType()).getElementType();
  if (!element.isF32())
    value = b.create<arith::TruncFOp>(element, value);
  b.create<memref::StoreOp>(value, buffer, indices);
}

} // namespace attnc::attn
