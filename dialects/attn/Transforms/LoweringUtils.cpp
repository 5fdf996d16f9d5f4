//===- LoweringUtils.cpp - helpers shared by the vector lowerings -------------===//
#include "attn/Transforms/LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/TypeUtilities.h"

#include <limits>
#include <numbers>

using namespace mlir;

namespace attnc::attn {

Value indexConstant(ImplicitLocOpBuilder& b, int64_t value) {
  return b.create<arith::ConstantIndexOp>(value);
}

Value f32Constant(ImplicitLocOpBuilder& b, double value) {
  return b.create<arith::ConstantOp>(b.getF32FloatAttr(static_cast<float>(value)));
}

Value f32Splat(ImplicitLocOpBuilder& b, int64_t lanes, double value) {
  auto type = VectorType::get({lanes}, b.getF32Type());
  return b.create<arith::ConstantOp>(
      DenseElementsAttr::get(type, b.getF32FloatAttr(static_cast<float>(value))));
}

namespace {

// `value` in the f32 shape of `like` (a scalar or a vector).
Value constantLike(ImplicitLocOpBuilder& b, Value like, double value) {
  if (auto vector = dyn_cast<VectorType>(like.getType()))
    return b.create<arith::ConstantOp>(
        DenseElementsAttr::get(vector, b.getF32FloatAttr(static_cast<float>(value))));
  return f32Constant(b, value);
}

Value equals(ImplicitLocOpBuilder& b, Value x, double value) {
  return b.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, x, constantLike(b, x, value));
}

constexpr double kInf = std::numeric_limits<double>::infinity();

} // namespace

Value finiteMax(ImplicitLocOpBuilder& b, Value m) {
  return b.create<arith::SelectOp>(equals(b, m, -kInf), constantLike(b, m, 0), m);
}

Value rescaleFactor(ImplicitLocOpBuilder& b, Value from, Value to) {
  return b.create<arith::SelectOp>(equals(b, from, -kInf), constantLike(b, from, 0),
                                   b.create<math::ExpOp>(b.create<arith::SubFOp>(from, to)));
}

Value probabilityExp(ImplicitLocOpBuilder& b, Value x) {
  auto type = cast<VectorType>(x.getType());
  auto bits = type.clone(b.getI32Type());
  auto splatInt = [&](int32_t v) {
    return b.create<arith::ConstantOp>(DenseElementsAttr::get(bits, b.getI32IntegerAttr(v)));
  };
  auto splat = [&](double v) { return constantLike(b, x, v); };
  // x clamped so that 2^n stays a normal number (n >= -125).
  Value clamped = b.create<arith::MaximumFOp>(x, splat(-125 * std::numbers::ln2));
  // n = round(x log2 e) by adding 1.5 2^23: the sum's low mantissa bits hold n (|n| < 2^22).
  constexpr double kRoundingBias = 12582912.0;
  constexpr int32_t kRoundingBiasBits = 0x4B400000;
  Value biased = b.create<arith::AddFOp>(
      b.create<arith::MulFOp>(clamped, splat(std::numbers::log2e)), splat(kRoundingBias));
  Value n = b.create<arith::SubFOp>(biased, splat(kRoundingBias));
  // r = x - n ln 2 in two parts (Cody and Waite): ln2Hi has 9 significant bits, so n ln2Hi is
  // exact; |r| <= ln 2 / 2.
  constexpr double kLn2Hi = 0.693359375, kLn2Lo = std::numbers::ln2 - kLn2Hi;
  Value r = b.create<math::FmaOp>(n, splat(-kLn2Hi), clamped);
  r = b.create<math::FmaOp>(n, splat(-kLn2Lo), r);
  // e^r = sum_k r^k / k!, k <= 7 (5e-9 relative at |r| = ln 2 / 2), by Horner's rule.
  double coefficient[8];
  coefficient[0] = 1;
  for (int k = 1; k <= 7; ++k)
    coefficient[k] = coefficient[k - 1] / k;
  Value p = splat(coefficient[7]);
  for (int k = 6; k >= 0; --k)
    p = b.create<math::FmaOp>(p, r, splat(coefficient[k]));
  Value exponent =
      b.create<arith::ShLIOp>(b.create<arith::SubIOp>(b.create<arith::BitcastOp>(bits, biased),
                                                      splatInt(kRoundingBiasBits)),
                              splatInt(23));
  Value result = b.create<arith::BitcastOp>(
      type, b.create<arith::AddIOp>(b.create<arith::BitcastOp>(bits, p), exponent));
  Value nan = b.create<arith::CmpFOp>(arith::CmpFPredicate::UNO, x, x);
  return b.create<arith::SelectOp>(nan, x, result);
}

Value inverseSum(ImplicitLocOpBuilder& b, Value l) {
  return b.create<arith::SelectOp>(equals(b, l, 0), constantLike(b, l, 0),
                                   b.create<arith::DivFOp>(constantLike(b, l, 1), l));
}

Value finishedLse(ImplicitLocOpBuilder& b, Value m, Value l) {
  Value shift = constantLike(b, m, static_cast<float>(attnc::softmax::kProbabilityShift));
  Value lse = b.create<arith::AddFOp>(b.create<arith::AddFOp>(m, shift), b.create<math::LogOp>(l));
  return b.create<arith::SelectOp>(equals(b, l, 0), constantLike(b, l, -kInf), lse);
}

Value sinkShare(ImplicitLocOpBuilder& b, Value sink, Value to, double shift) {
  return rescaleFactor(b, sink, b.create<arith::AddFOp>(to, constantLike(b, to, shift)));
}

SinkFold foldSink(ImplicitLocOpBuilder& b, Value m, Value l, Value sink, double shift) {
  Value max = b.create<arith::MaximumFOp>(m, sink);
  Value to = finiteMax(b, max);
  Value accFactor = rescaleFactor(b, m, to);
  Value sum = b.create<arith::AddFOp>(b.create<arith::MulFOp>(l, accFactor),
                                      sinkShare(b, sink, to, shift));
  return {max, sum, accFactor};
}

Value clampIndex(ImplicitLocOpBuilder& b, Value index, Value last) {
  if (!index.getType().isIndex())
    index = b.create<arith::IndexCastOp>(b.getIndexType(), index);
  return b.create<arith::MinSIOp>(b.create<arith::MaxSIOp>(index, indexConstant(b, 0)), last);
}

Value cacheKeys(ImplicitLocOpBuilder& b, Value rows, Value table) {
  if (!table)
    return b.create<memref::DimOp>(rows, 2);
  return b.create<arith::MulIOp>(b.create<memref::DimOp>(table, 1),
                                 indexConstant(b, cast<MemRefType>(rows.getType()).getDimSize(2)));
}

Value cacheLastPage(ImplicitLocOpBuilder& b, Value rows) {
  return b.create<arith::SubIOp>(b.create<memref::DimOp>(rows, 0), indexConstant(b, 1));
}

std::pair<Value, Value> pagedRow(ImplicitLocOpBuilder& b, Value table, Value sequence, Value key,
                                 int64_t pageSize, Value lastPage) {
  Value pageRows = indexConstant(b, pageSize);
  Value entry = b.create<memref::LoadOp>(
      table, ValueRange{sequence, b.create<arith::DivUIOp>(key, pageRows)});
  return {clampIndex(b, entry, lastPage), b.create<arith::RemUIOp>(key, pageRows)};
}

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

Value dotBf16Pairs(ImplicitLocOpBuilder& b, Value acc, Value a, Value bPairs) {
  auto noFastMath = LLVM::FastmathFlagsAttr::get(b.getContext(), LLVM::FastmathFlags::none);
  return b
      .create<LLVM::CallIntrinsicOp>(acc.getType(),
                                     b.getStringAttr("llvm.x86.avx512bf16.dpbf16ps.512"),
                                     ValueRange{acc, a, bPairs}, noFastMath)
      .getResult(0);
}

Value roundToBf16(ImplicitLocOpBuilder& b, Value vector) {
  auto noFastMath = LLVM::FastmathFlagsAttr::get(b.getContext(), LLVM::FastmathFlags::none);
  auto type =
      VectorType::get({cast<VectorType>(vector.getType()).getNumElements()}, b.getBF16Type());
  return b
      .create<LLVM::CallIntrinsicOp>(type, b.getStringAttr("llvm.x86.avx512bf16.cvtneps2bf16.512"),
                                     ValueRange{vector}, noFastMath)
      .getResult(0);
}

Value loadBf16Pair(ImplicitLocOpBuilder& b, Value buffer, ValueRange indices) {
  Value pair = b.create<vector::LoadOp>(VectorType::get({2}, b.getBF16Type()), buffer, indices);
  return b.create<vector::ExtractOp>(
      b.create<vector::BitCastOp>(VectorType::get({1}, b.getI32Type()), pair), 0);
}

Value loadBf16Alone(ImplicitLocOpBuilder& b, Value buffer, ValueRange indices) {
  return b.create<arith::ExtUIOp>(
      b.getI32Type(),
      b.create<arith::BitcastOp>(b.getI16Type(), b.create<memref::LoadOp>(buffer, indices)));
}

Value broadcastBf16Pair(ImplicitLocOpBuilder& b, Value pair, int64_t lanes) {
  return b.create<vector::BitCastOp>(
      VectorType::get({2 * lanes}, b.getBF16Type()),
      b.create<vector::BroadcastOp>(VectorType::get({lanes}, b.getI32Type()), pair));
}

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

Operation* firstPhase(Block& block) {
  for (Operation& op : block)
    if (isa<scf::ForallOp>(op) || op.getDialect()->getNamespace() == "attn")
      return &op;
  return block.getTerminator();
}

void forRange(ImplicitLocOpBuilder& b, Value lower, Value upper,
              const std::function<void(ImplicitLocOpBuilder&, Value)>& body) {
  b.create<scf::ForOp>(lower, upper, indexConstant(b, 1), std::nullopt,
                       [&](OpBuilder& nested, Location loc, Value i, ValueRange) {
                         ImplicitLocOpBuilder inner(loc, nested);
                         body(inner, i);
                         inner.create<scf::YieldOp>();
                       });
}

SmallVector<Value> rankOneUpdate(ImplicitLocOpBuilder& b, ArrayRef<Value> rowVectors,
                                 ArrayRef<Value> scalars, ValueRange acc) {
  const size_t vectors = rowVectors.size();
  auto type = cast<VectorType>(rowVectors.front().getType());
  SmallVector<Value> next(acc.begin(), acc.end());
  for (auto [s, scalar] : llvm::enumerate(scalars)) {
    Value splat = b.create<vector::BroadcastOp>(type, scalar);
    for (size_t r = 0; r < vectors; ++r)
      next[s * vectors + r] = b.create<vector::FMAOp>(rowVectors[r], splat, acc[s * vectors + r]);
  }
  return next;
}

Value gatherRows(ImplicitLocOpBuilder& b, Value firstRow, Value seqQ, int64_t lanes, Type element,
                 function_ref<Value(ImplicitLocOpBuilder&, Value)> load) {
  Value lastRow = b.create<arith::SubIOp>(seqQ, indexConstant(b, 1));
  Value rows = b.create<arith::ConstantOp>(b.getZeroAttr(VectorType::get({lanes}, element)));
  for (int64_t lane = 0; lane < lanes; ++lane) {
    Value i = b.create<arith::MinSIOp>(b.create<arith::AddIOp>(firstRow, indexConstant(b, lane)),
                                       lastRow);
    rows = b.create<vector::InsertOp>(load(b, i), rows, lane);
  }
  return rows;
}

} // namespace attnc::attn
