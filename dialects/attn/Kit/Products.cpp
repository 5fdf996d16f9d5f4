//===- Products.cpp - the ways of multiplying -----------------------------===//
#include "attn/Kit/Products.h"

#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc::attn {

SmallVector<Value> pairDotUpdate(ImplicitLocOpBuilder& b, ArrayRef<Value> rowPairs,
                                 ArrayRef<Value> pairs, ValueRange acc) {
  const size_t count = rowPairs.size();
  const int64_t lanes = cast<VectorType>(rowPairs.front().getType()).getNumElements() / 2;
  SmallVector<Value> next(acc.begin(), acc.end());
  for (auto [s, pair] : llvm::enumerate(pairs)) {
    Value splat = broadcastBf16Pair(b, pair, lanes);
    for (size_t r = 0; r < count; ++r)
      next[s * count + r] = dotBf16Pairs(b, acc[s * count + r], rowPairs[r], splat);
  }
  return next;
}

SmallVector<Value>
amxTileProducts(ImplicitLocOpBuilder& b, SmallVector<Value> acc, int64_t aTiles, int64_t bTiles,
                int64_t steps, function_ref<Value(ImplicitLocOpBuilder&, int64_t, int64_t)> loadA,
                function_ref<Value(ImplicitLocOpBuilder&, int64_t, int64_t)> loadB) {
  constexpr int64_t kTileRows = 16;
  auto tileF32 = VectorType::get({kTileRows, kTileRows}, b.getF32Type());
  for (int64_t s = 0; s < steps; ++s) {
    SmallVector<Value> a;
    for (int64_t i = 0; i < aTiles; ++i)
      a.push_back(loadA(b, s, i));
    for (int64_t t = 0; t < bTiles; ++t) {
      Value bTile = loadB(b, s, t);
      for (int64_t i = 0; i < aTiles; ++i)
        acc[i * bTiles + t] = b.create<amx::TileMulFOp>(tileF32, a[i], bTile, acc[i * bTiles + t]);
    }
  }
  return acc;
}

Value mmaSync(ImplicitLocOpBuilder& b, Value a, Value bFrag, Value acc) {
  return b.create<nvgpu::MmaSyncOp>(a, bFrag, acc, ArrayRef<int64_t>{16, 8, 16});
}

Value mmaSyncTf32(ImplicitLocOpBuilder& b, Value a, Value bFrag, Value acc) {
  return b.create<nvgpu::MmaSyncOp>(a, bFrag, acc, ArrayRef<int64_t>{16, 8, 8},
                                    /*tf32Enabled=*/true);
}

Value roundToTf32(ImplicitLocOpBuilder& b, Value x) {
  Value bits =
      b.create<LLVM::CallIntrinsicOp>(b.getI32Type(), "llvm.nvvm.f2tf32.rna", x).getResult(0);
  return b.create<arith::BitcastOp>(b.getF32Type(), bits);
}

namespace {

// A register tile over the R vectors of query rows and each scalar (a key's or a value's
// element, broadcast): acc[s * R + r] = element(rowVectors[r], scalar s in every lane,
// acc[s * R + r]).
SmallVector<Value> registerTile(ImplicitLocOpBuilder& b, ArrayRef<Value> rowVectors,
                                ArrayRef<Value> scalars, ValueRange acc,
                                function_ref<Value(Value row, Value splat, Value acc)> element) {
  const size_t vectors = rowVectors.size();
  auto type = cast<VectorType>(rowVectors.front().getType());
  SmallVector<Value> next(acc.begin(), acc.end());
  for (auto [s, scalar] : llvm::enumerate(scalars)) {
    Value splat = b.create<vector::BroadcastOp>(type, scalar);
    for (size_t r = 0; r < vectors; ++r)
      next[s * vectors + r] = element(rowVectors[r], splat, acc[s * vectors + r]);
  }
  return next;
}

} // namespace

SmallVector<Value> rankOneUpdate(ImplicitLocOpBuilder& b, ArrayRef<Value> rowVectors,
                                 ArrayRef<Value> scalars, ValueRange acc) {
  return registerTile(b, rowVectors, scalars, acc, [&](Value row, Value splat, Value sum) {
    return b.create<vector::FMAOp>(row, splat, sum).getResult();
  });
}

SmallVector<Value> tanhUpdate(ImplicitLocOpBuilder& b, ArrayRef<Value> rowVectors,
                              ArrayRef<Value> scalars, Value weight, ValueRange acc) {
  Value weights = b.create<vector::BroadcastOp>(rowVectors.front().getType(), weight);
  return registerTile(b, rowVectors, scalars, acc, [&](Value row, Value splat, Value sum) {
    Value hidden = b.create<math::TanhOp>(b.create<arith::AddFOp>(row, splat));
    return b.create<vector::FMAOp>(hidden, weights, sum).getResult();
  });
}

SmallVector<Value> reciprocalUpdate(ImplicitLocOpBuilder& b, ArrayRef<Value> rowVectors,
                                    ArrayRef<Value> scalars, Value weight, ValueRange acc) {
  auto type = cast<VectorType>(rowVectors.front().getType());
  Value weights = b.create<vector::BroadcastOp>(type, weight);
  Value one = b.create<arith::ConstantOp>(DenseElementsAttr::get(type, b.getF32FloatAttr(1.0f)));
  return registerTile(b, rowVectors, scalars, acc, [&](Value row, Value splat, Value sum) {
    Value denominator = b.create<vector::FMAOp>(row, splat, one);
    return b.create<vector::FMAOp>(b.create<arith::DivFOp>(one, denominator), weights, sum)
        .getResult();
  });
}

Value dotBf16Pairs(ImplicitLocOpBuilder& b, Value acc, Value a, Value bPairs) {
  auto noFastMath = LLVM::FastmathFlagsAttr::get(b.getContext(), LLVM::FastmathFlags::none);
  return b
      .create<LLVM::CallIntrinsicOp>(acc.getType(),
                                     b.getStringAttr("llvm.x86.avx512bf16.dpbf16ps.512"),
                                     ValueRange{acc, a, bPairs}, noFastMath)
      .getResult(0);
}

// vcvtne2ps2bf16 rounds both to nearest even in one instruction (every target of paired
// products has AVX512-BF16; arith.truncf becomes integer ops, attn-lower-to-llvm expands bf16
// for CPUs without it), giving [even, odd] as halves; one vpermw interleaves them.
Value roundToBf16Pairs(ImplicitLocOpBuilder& b, Value even, Value odd) {
  const int64_t lanes = cast<VectorType>(even.getType()).getNumElements();
  auto pairs = VectorType::get({2 * lanes}, b.getBF16Type());
  auto noFastMath = LLVM::FastmathFlagsAttr::get(b.getContext(), LLVM::FastmathFlags::none);
  Value halves = b.create<LLVM::CallIntrinsicOp>(
                      pairs, b.getStringAttr("llvm.x86.avx512bf16.cvtne2ps2bf16.512"),
                      ValueRange{odd, even}, noFastMath)
                     .getResult(0);
  SmallVector<int64_t> interleaved;
  for (int64_t l = 0; l < lanes; ++l)
    interleaved.append({l, lanes + l});
  return b.create<vector::ShuffleOp>(halves, halves, interleaved);
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

} // namespace attnc::attn
