//===- MmaFragments.cpp - warp-level blocks of the tensor-core kernels --------===//
#include "attn/Transforms/MmaFragments.h"

#include "attn/Kit/CacheRows.h"
#include "attn/Kit/Elements.h"
#include "attn/Kit/Products.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc::attn {

constexpr int64_t kChunk = 8; // elements per copy (16 bytes of f16 or bf16)

MmaFragments::MmaFragments(Builder& builder, ScoreOpInterface scoreOp, const MmaShape& shape)
    : scoreOp(scoreOp), element(shape.element), dk(shape.dk), dv(shape.dv), rows(shape.rows),
      warps(rows / 16), block(shape.block), headsPerTask(shape.headsPerTask),
      cType(VectorType::get({2, 2}, builder.getF32Type())),
      cTypeI32(VectorType::get({2, 2}, builder.getI32Type())),
      aType(VectorType::get({4, 2}, element)), bType(VectorType::get({2, 2}, element)) {}

void MmaFragments::emitLaneIds(ImplicitLocOpBuilder& b) {
  tid = b.create<gpu::ThreadIdOp>(gpu::Dimension::x);
  lane = b.create<arith::RemUIOp>(tid, c(b, kWarpSize));
  g = b.create<arith::DivUIOp>(lane, c(b, 4));
  t = b.create<arith::RemUIOp>(lane, c(b, 4));
}

// [[x0, x0], [x1, x1]]: a value per C fragment row, as a vector of `type`.
Value MmaFragments::rowsVector(ImplicitLocOpBuilder& b, Value row0, Value row1, VectorType type) {
  auto half = VectorType::get({2}, type.getElementType());
  Value v = b.create<vector::BroadcastOp>(type, row0);
  return b.create<vector::InsertOp>(b.create<vector::BroadcastOp>(half, row1), v, 1);
}

void MmaFragments::emitRows(ImplicitLocOpBuilder& b, Value rowBase) {
  Value warpRow =
      b.create<arith::MulIOp>(b.create<arith::DivUIOp>(tid, c(b, kWarpSize)), c(b, 16));
  myTileRows[0] = b.create<arith::AddIOp>(warpRow, g);
  myTileRows[1] = b.create<arith::AddIOp>(myTileRows[0], c(b, 8));
  for (int64_t r = 0; r < 2; ++r) {
    myRows[r] = b.createOrFold<arith::AddIOp>(
        rowBase, b.createOrFold<arith::DivUIOp>(myTileRows[r], c(b, headsPerTask)));
    myHeads[r] = b.createOrFold<arith::AddIOp>(
        head, b.createOrFold<arith::RemUIOp>(myTileRows[r], c(b, headsPerTask)));
  }
  terms[0].emplace(b, scoreOp, batch, myHeads[0]);
  terms[1].reset();
  if (headsPerTask > 1 && 8 % headsPerTask != 0)
    terms[1].emplace(b, scoreOp, batch, myHeads[1]);
}

// A fragments of the query tile's 16 rows of this warp, straight from global memory (once per
// task; rows past Tq repeat the last row, their results are never stored).
void MmaFragments::emitQueryFragments(ImplicitLocOpBuilder& b, Value query) {
  queryFrags = rowFragments(b, query, myHeads, myRows, lastRow, dk);
}

// Each lane loads its 8 elements per 16 columns as 4 pairs.
SmallVector<Value> MmaFragments::rowFragments(ImplicitLocOpBuilder& b, Value tensor,
                                              const Value heads[2], const Value rowsOf[2],
                                              Value last, int64_t width) {
  auto pair = VectorType::get({2}, element);
  Value rowsClamped[2] = {b.create<arith::MinUIOp>(rowsOf[0], last),
                          b.create<arith::MinUIOp>(rowsOf[1], last)};
  Value twoT = b.create<arith::MulIOp>(t, c(b, 2));
  SmallVector<Value> frags;
  for (int64_t kk = 0; kk < width / 16; ++kk) {
    Value frag =
        b.create<arith::ConstantOp>(DenseElementsAttr::get(aType, b.getFloatAttr(element, 0.0)));
    for (int64_t i = 0; i < 4; ++i) {
      Value column = b.create<arith::AddIOp>(twoT, c(b, 16 * kk + 8 * (i / 2)));
      Value x = b.create<vector::LoadOp>(
          pair, tensor, ValueRange{batch, heads[i % 2], rowsClamped[i % 2], column});
      frag = b.create<vector::InsertOp>(x, frag, i);
    }
    frags.push_back(frag);
  }
  return frags;
}

// Issues cp.async copies of keys [firstKey, firstKey + block) x [0, width) of `global` (K or
// V of this task's K/V head) into `shared`, 16 bytes per copy, the threads sharing the
// chunks; keys at or past validEnd are zero-filled (their address clamped into the tensor).
// A paged cache's keys are read through the block table (CacheRows::place), those past the
// sequence's end zero-filled. Quantized rows (int8, fp8 E4M3) are loaded, decoded (exact in f16 and
// bf16: toF32Unscaled) and stored by the threads themselves, and each row's scale (times the codes'
// factor, 0 past validEnd) into `sharedScales`, for the scores and probabilities
// (fragmentScales). Returns the group of cp.async copies to wait on, or null for quantized rows.
Value MmaFragments::copyRows(ImplicitLocOpBuilder& b, Value global, Value shared, int64_t width,
                             Value head, Value firstKey, Value validEnd, Value last,
                             Value rowScales, Value sharedScales) {
  const int64_t perRow = width / kChunk, chunks = block * perRow, threads = warps * kWarpSize;
  SmallVector<Value> copies;
  for (int64_t i = 0; i < (chunks + threads - 1) / threads; ++i) {
    // Threads past the last chunk copy it again: the same bytes to the same place.
    Value chunk =
        b.create<arith::MinUIOp>(b.create<arith::AddIOp>(tid, c(b, i * threads)), c(b, chunks - 1));
    Value row = b.create<arith::DivUIOp>(chunk, c(b, perRow));
    Value column =
        b.create<arith::MulIOp>(b.create<arith::RemUIOp>(chunk, c(b, perRow)), c(b, kChunk));
    Value keyIndex = b.create<arith::AddIOp>(firstKey, row);
    Value valid = b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, keyIndex, validEnd);
    if (sequenceEnd) // zeros past the sequence, whatever its pages hold there
      valid = b.create<arith::AndIOp>(
          valid, b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, keyIndex, sequenceEnd));
    Value source = b.create<arith::MinUIOp>(keyIndex, last);
    Value outer;
    std::tie(outer, source) = cache->place(b, batch, source);
    if (sharedScales) {
      Type codeType = cast<MemRefType>(global.getType()).getElementType();
      Value codes = b.create<vector::LoadOp>(VectorType::get({kChunk}, codeType), global,
                                             ValueRange{outer, head, source, column});
      auto decodedType = VectorType::get({kChunk}, b.getF32Type());
      Value decoded = b.create<arith::SelectOp>(valid, toF32Unscaled(b, codes),
                                                splatConstant(b, decodedType, 0));
      b.create<vector::StoreOp>(
          b.create<arith::TruncFOp>(VectorType::get({kChunk}, element), decoded), shared,
          ValueRange{row, column});
      auto ifFirst = b.create<scf::IfOp>(
          b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, column, c(b, 0)),
          /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifFirst.thenBlock());
      Value scale = CacheRows::rowScale(b, rowScales, global, outer, head, source);
      b.create<memref::StoreOp>(b.create<arith::SelectOp>(valid, scale, f32Constant(b, 0)),
                                sharedScales, ValueRange{row});
      continue;
    }
    Value sourceElements = b.create<arith::SelectOp>(valid, c(b, kChunk), c(b, 0));
    copies.push_back(b.create<nvgpu::DeviceAsyncCopyOp>(
        nvgpu::DeviceAsyncTokenType::get(b.getContext()), shared, ValueRange{row, column}, global,
        ValueRange{outer, head, source, column}, b.getIndexAttr(kChunk), sourceElements,
        b.getUnitAttr()));
  }
  if (copies.empty())
    return Value();
  return b.create<nvgpu::DeviceAsyncCreateGroupOp>(nvgpu::DeviceAsyncTokenType::get(b.getContext()),
                                                   copies);
}

Value MmaFragments::fragmentScales(ImplicitLocOpBuilder& b, Value sharedScales, int64_t j) {
  Value pair = b.create<vector::LoadOp>(
      VectorType::get({2}, b.getF32Type()), sharedScales,
      ValueRange{b.create<arith::AddIOp>(b.create<arith::MulIOp>(t, c(b, 2)), c(b, 8 * j))});
  return b.create<vector::BroadcastOp>(cType, pair);
}

// Waits for this thread's copies (if any), then for every thread: the tile is complete, and no
// warp still reads the tile the next copy overwrites.
void MmaFragments::waitAndSync(ImplicitLocOpBuilder& b, Value group) {
  if (group)
    b.create<nvgpu::DeviceAsyncWaitOp>(group, b.getI32IntegerAttr(0));
  b.create<gpu::BarrierOp>();
}

// An ldmatrix.x4 reads the B fragments of two row tiles of `shared`: lanes 0-7 address rows
// 0-7 at columns 0-7 of the k-step, lanes 8-15 rows 0-7 at columns 8-15, lanes 16-31 the same
// for rows 8-15.
SmallVector<Value> MmaFragments::rowProducts(ImplicitLocOpBuilder& b, ArrayRef<Value> a,
                                             Value shared, int64_t width) {
  Value row = b.create<arith::AddIOp>(
      b.create<arith::RemUIOp>(lane, c(b, 8)),
      b.create<arith::MulIOp>(b.create<arith::DivUIOp>(lane, c(b, 16)), c(b, 8)));
  Value column = b.create<arith::MulIOp>(
      b.create<arith::RemUIOp>(b.create<arith::DivUIOp>(lane, c(b, 8)), c(b, 2)), c(b, 8));
  Value zero = splatConstant(b, cType, 0);
  SmallVector<Value> s(block / 8, zero);
  for (int64_t kk = 0; kk < width / 16; ++kk)
    for (int64_t pair = 0; pair < block / 16; ++pair)
      mmaTwoTiles(b, a[kk], shared, row, 16 * pair, column, 16 * kk, /*transpose=*/false, s,
                  2 * pair);
  return s;
}

// P's C fragments of tiles 2 kk and 2 kk + 1 are, row by row, the A fragment of step kk. An
// ldmatrix.x4.trans reads the B fragments of two 8-column tiles of B: lanes 0-7 address rows
// 0-7, lanes 8-15 rows 8-15 (columns 0-7), lanes 16-31 the same at columns 8-15.
void MmaFragments::accumulateProducts(ImplicitLocOpBuilder& b, ArrayRef<Value> p, Value shared,
                                      int64_t width, SmallVectorImpl<Value>& acc) {
  Value row = b.create<arith::AddIOp>(
      b.create<arith::RemUIOp>(lane, c(b, 8)),
      b.create<arith::MulIOp>(
          b.create<arith::RemUIOp>(b.create<arith::DivUIOp>(lane, c(b, 8)), c(b, 2)), c(b, 8)));
  Value column = b.create<arith::MulIOp>(b.create<arith::DivUIOp>(lane, c(b, 16)), c(b, 8));
  for (int64_t kk = 0; kk < static_cast<int64_t>(p.size()) / 2; ++kk) {
    Value lo = b.create<arith::TruncFOp>(bType, p[2 * kk]);
    Value hi = b.create<arith::TruncFOp>(bType, p[2 * kk + 1]);
    Value frag = b.create<vector::ShuffleOp>(lo, hi, ArrayRef<int64_t>{0, 1, 2, 3});
    for (int64_t pair = 0; pair < width / 16; ++pair)
      mmaTwoTiles(b, frag, shared, row, 16 * kk, column, 16 * pair, /*transpose=*/true, acc,
                  2 * pair);
  }
}

void MmaFragments::mmaTwoTiles(ImplicitLocOpBuilder& b, Value a, Value shared, Value row,
                               int64_t rowOffset, Value column, int64_t columnOffset,
                               bool transpose, SmallVectorImpl<Value>& acc, int64_t first) {
  Value frag =
      b.create<nvgpu::LdMatrixOp>(VectorType::get({4, 2}, element), shared,
                                  ValueRange{b.create<arith::AddIOp>(row, c(b, rowOffset)),
                                             b.create<arith::AddIOp>(column, c(b, columnOffset))},
                                  transpose, /*numTiles=*/4);
  for (int64_t half = 0; half < 2; ++half) {
    Value bFrag = b.create<vector::ExtractStridedSliceOp>(
        frag, ArrayRef<int64_t>{2 * half, 0}, ArrayRef<int64_t>{2, 2}, ArrayRef<int64_t>{1, 1});
    acc[first + half] = mmaSync(b, a, bFrag, acc[first + half]);
  }
}

Value MmaFragments::keyBase(ImplicitLocOpBuilder& b, Value keyBlock, int64_t j) {
  return b.create<arith::AddIOp>(b.create<arith::AddIOp>(keyBlock, c(b, 8 * j)),
                                 b.create<arith::MulIOp>(t, c(b, 2)));
}

Value MmaFragments::fragmentKeys(ImplicitLocOpBuilder& b, Value base) {
  Value pairOffsets =
      b.create<arith::ConstantOp>(DenseElementsAttr::get(cTypeI32, ArrayRef<int32_t>{0, 1, 0, 1}));
  return b.create<arith::AddIOp>(b.create<vector::BroadcastOp>(cTypeI32, i32(b, base)),
                                 pairOffsets);
}

// s = terms(scale * s) for key tile j at keys keyBlock + 8 j + 2 t + {0, 1}, and -inf for
// keys at or past keyEnd (the block's end).
void MmaFragments::applyTerms(ImplicitLocOpBuilder& b, SmallVector<Value>& s, Value keyBlock,
                              Value keyEnd) {
  Value scale = splatConstant(b, cType, scoreOp.getScale().convertToDouble());
  Value end = b.create<vector::BroadcastOp>(cTypeI32, i32(b, keyEnd));
  for (int64_t j = 0; j < block / 8; ++j) {
    Value keys = fragmentKeys(b, keyBase(b, keyBlock, j));
    Value x = b.create<arith::MulFOp>(s[j], scale);
    x = perHead(b, x, keys, [&](const ScoreTerms& rowTerms, Value y, Value at, Value key) {
      return rowTerms.apply(b, y, at, key, ScoreTerms::MaskMod::Evaluate);
    });
    Value inBlock = b.create<arith::CmpIOp>(arith::CmpIPredicate::slt, keys, end);
    s[j] = b.create<arith::SelectOp>(inBlock, x, splatConstant(b, cType, -kInf));
  }
}

Value MmaFragments::applyDropout(ImplicitLocOpBuilder& b, Value p, Value keyBlock, int64_t j) {
  return perHead(b, p, fragmentKeys(b, keyBase(b, keyBlock, j)),
                 [&](const ScoreTerms& rowTerms, Value y, Value at, Value key) {
                   return rowTerms.dropout(b, y, at, key);
                 });
}

Value MmaFragments::perHead(
    ImplicitLocOpBuilder& b, Value x, Value keys,
    function_ref<Value(const ScoreTerms&, Value, Value, Value)> f) {
  if (!terms[1])
    return f(*terms[0], x, positions, keys);
  for (int64_t r = 0; r < 2; ++r) {
    Value row = f(*terms[r], b.create<vector::ExtractOp>(x, r),
                  b.create<vector::ExtractOp>(positions, r), b.create<vector::ExtractOp>(keys, r));
    x = b.create<vector::InsertOp>(row, x, r);
  }
  return x;
}

// The max or sum of x over the 4 lanes of a quad (the lanes holding one C row).
Value MmaFragments::quadReduce(ImplicitLocOpBuilder& b, Value x, bool max) {
  Value width = b.create<arith::ConstantOp>(b.getI32IntegerAttr(kWarpSize));
  for (int32_t offset : {1, 2}) {
    Value other =
        b.create<gpu::ShuffleOp>(x, b.create<arith::ConstantOp>(b.getI32IntegerAttr(offset)), width,
                                 gpu::ShuffleMode::XOR)
            .getShuffleResult();
    x = max ? Value(b.create<arith::MaximumFOp>(x, other))
            : Value(b.create<arith::AddFOp>(x, other));
  }
  return x;
}

} // namespace attnc::attn
