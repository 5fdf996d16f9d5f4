//===- MatmulMma.cpp - attn.matmul on a GPU's tensor cores ---------------------===//
//
// A variant's operand product (mha's projections and W_O, bilinear's q W, additive's W1 q and
// W2 k, Linformer's E K and F V, linear attention's chunk products) as a gpu.launch in place of
// the op, instead of LowerMatmul.cpp's row per thread: one block per 64 x 64 tile of out for a
// batch and head, 4 warps of 32 x 32 (2 x 4 MMA tiles of 16 x 8), over the contraction in
// stages of 32 steps:
//
//   lhs [64 rows, 32 steps] and rhs [32 steps, 64 columns] -> shared memory as TF32, zero past
//     out's rows and columns, the batch's extent (limit) and, under causal, each row's diagonal
//   acc += lhs rhs             mma.sync m16n8k8 .tf32, f32 accumulators, 4 steps of 8 a stage
//
// With batch_sum (the backward's weight gradients, out [1, H, R, C]) a block's stages run over
// every batch entry in order into the same accumulators: each element one thread's ordered sum.
//
// TF32 keeps 10 bits of mantissa: f16 and bf16 operands exactly; f32 ones (workspaces such as
// the attention's output before W_O, linear attention's feature rows, lhs plus mha's sinusoid,
// and in the backward dY and the heads' f32 dQ, dK and dV rows) rounded to nearest, 2^-11
// relative per operand: f16's own rounding, 8 times below bf16's, and below the 2e-2 both specs
// are verified to (the schedule takes tensor cores for those specs only); a weight gradient's
// sum over B T terms may cancel, so its error is relative to the terms, not to the sum.
// Every element passes through a thread's registers on its way to shared memory, so the
// operands keep any type and strides, and mha's sinusoid is added there.
//
// Fragments (PTX ISA, mma.m16n8k8 .tf32), lane = 4 g + t:
//   A (16 x 8, vector<4x1xf32>): [0] row g, step t; [1] row g + 8, step t; [2] row g,
//                                step t + 4; [3] row g + 8, step t + 4
//   B (8 x 8, vector<2x1xf32>):  [0] step t, column g; [1] step t + 4, column g
//   C (16 x 8, vector<2x2xf32>): [r][c] row g + 8 r, column 2 t + c
// The shared rows are padded to 36 and 72 floats, so a fragment's 32 loads hit 32 banks.
//
//===---------------------------------------------------------------------------===//
#include "attn/Kit/Builders.h"
#include "attn/Kit/Elements.h"
#include "attn/Kit/Products.h"
#include "attn/Transforms/MatmulOperands.h"
#include "attn/Transforms/Transforms.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc::attn {
namespace {

constexpr int64_t kTile = 64;                       // out rows and columns per block
constexpr int64_t kStage = 32;                      // contraction steps per shared stage
constexpr int64_t kWarpTile = 32;                   // out rows and columns per warp
constexpr int64_t kWarpsAcross = kTile / kWarpTile; // warps per row (and column) of tiles
constexpr int64_t kThreads = kWarpsAcross * kWarpsAcross * 32;
constexpr int64_t kLhsPitch = kStage + 4; // floats per shared lhs row
constexpr int64_t kRhsPitch = kTile + 8;  // floats per shared rhs step
constexpr int64_t kRowFragments = kWarpTile / 16, kColumnFragments = kWarpTile / 8;
// The staging hands each thread whole elements of a row (lhs) or step (rhs).
static_assert(kThreads % kStage == 0 && kThreads % kTile == 0 && kTile * kStage % kThreads == 0);

class MatmulMma {
public:
  explicit MatmulMma(MatmulOp op) : operands(op) {}
  void emit(ImplicitLocOpBuilder& b);

private:
  using Builder = ImplicitLocOpBuilder;
  void placeBlock(Builder& b, gpu::LaunchOp launch);
  void stageLhs(Builder& b, Value lhsBatch, Value first, Value extent);
  void stageRhs(Builder& b, Value rhsBatch, Value first, Value extent);
  SmallVector<Value> multiplyStage(Builder& b, ValueRange acc);
  // acc after the stages of the contraction's steps of a batch entry.
  SmallVector<Value> multiplyStages(Builder& b, const MatmulOperands::BatchEntry& entry,
                                    ValueRange acc);
  void write(Builder& b, ArrayRef<Value> acc);
  Value c(Builder& b, int64_t v) { return indexConstant(b, v); }
  Value add(Builder& b, Value x, int64_t v) { return b.create<arith::AddIOp>(x, c(b, v)); }
  Value below(Builder& b, Value x, Value bound) {
    return b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, x, bound);
  }

  MatmulOperands operands;
  // Inside the launch.
  Value lhsTile, rhsTile;               // shared [64, 36] and [32, 72] f32
  Value tid, g, t, warpRow, warpColumn; // the warp's first row and column in the tile
  Value batch, head, lhsHead, rhsHead;
  Value firstRow, firstColumn, rows, table; // the tile's, T, the sinusoid's frequencies
};

void MatmulMma::placeBlock(Builder& b, gpu::LaunchOp launch) {
  tid = launch.getThreadIds().x;
  Value lane = b.create<arith::RemUIOp>(tid, c(b, 32));
  Value warp = b.create<arith::DivUIOp>(tid, c(b, 32));
  g = b.create<arith::DivUIOp>(lane, c(b, 4));
  t = b.create<arith::RemUIOp>(lane, c(b, 4));
  warpRow =
      b.create<arith::MulIOp>(b.create<arith::DivUIOp>(warp, c(b, kWarpsAcross)), c(b, kWarpTile));
  warpColumn =
      b.create<arith::MulIOp>(b.create<arith::RemUIOp>(warp, c(b, kWarpsAcross)), c(b, kWarpTile));
  // Block x = (batch, head, row tile), the row tile fastest; block y = the column tile.
  rows = b.create<memref::DimOp>(operands.out, 2);
  Value rowTiles = b.create<arith::CeilDivUIOp>(rows, c(b, kTile));
  Value heads = c(b, operands.out.getType().getDimSize(1));
  Value task = launch.getBlockIds().x;
  firstRow = b.create<arith::MulIOp>(b.create<arith::RemUIOp>(task, rowTiles), c(b, kTile));
  Value rest = b.create<arith::DivUIOp>(task, rowTiles);
  head = b.create<arith::RemUIOp>(rest, heads);
  batch = b.create<arith::DivUIOp>(rest, heads);
  firstColumn = b.create<arith::MulIOp>(launch.getBlockIds().y, c(b, kTile));
  lhsHead = operands.factorIndex(b, operands.lhs, 1, head);
  rhsHead = operands.factorIndex(b, operands.rhs, 1, head);
  table = operands.sinusoidTable(b);
}

// lhsTile[r, s] = lhs[.., firstRow + r, first + s] (lhs_transposed: lhs[.., first + s,
// firstRow + r]) for the 64 x 32 elements, 16 a thread: a warp reads 32 consecutive steps of a
// row (strided ones when transposed). Outside the operand the read is clamped and its value
// replaced by 0, so no element past a buffer is touched.
void MatmulMma::stageLhs(Builder& b, Value lhsBatch, Value first, Value extent) {
  Value lastRow = b.create<arith::SubIOp>(rows, c(b, 1));
  Value lastStep = b.create<arith::SubIOp>(operands.steps(b), c(b, 1));
  Value stepInStage = b.create<arith::RemUIOp>(tid, c(b, kStage));
  Value step = b.create<arith::AddIOp>(first, stepInStage);
  Value stepInside = below(b, step, extent);
  Value readStep = b.create<arith::MinUIOp>(step, lastStep);
  Value firstRowInTile = b.create<arith::DivUIOp>(tid, c(b, kStage));
  forRange(b, c(b, 0), c(b, kTile * kStage / kThreads), [&](Builder& b, Value i) {
    Value rowInTile = b.create<arith::AddIOp>(firstRowInTile,
                                              b.create<arith::MulIOp>(i, c(b, kThreads / kStage)));
    Value row = b.create<arith::AddIOp>(firstRow, rowInTile);
    Value inside = b.create<arith::AndIOp>(stepInside, below(b, row, rows));
    if (operands.op.getCausal()) // row t sums steps r <= t
      inside = b.create<arith::AndIOp>(
          inside, b.create<arith::CmpIOp>(arith::CmpIPredicate::ule, step, row));
    Value x = operands.lhsElement(b, table, lhsBatch, lhsHead,
                                  b.create<arith::MinUIOp>(row, lastRow), readStep);
    x = b.create<arith::SelectOp>(inside, roundToTf32(b, x), f32Constant(b, 0));
    b.create<memref::StoreOp>(x, lhsTile, ValueRange{rowInTile, stepInStage});
  });
}

// rhsTile[s, c] = rhs[.., first + s, firstColumn + c] for the 32 x 64 elements, 16 a thread: a
// warp reads 32 consecutive columns of a step. Zero outside, as stageLhs, so that no element
// of rhs past the extent meets lhs's zeros (0 times an infinity is NaN).
void MatmulMma::stageRhs(Builder& b, Value rhsBatch, Value first, Value extent) {
  Value lastStep = b.create<arith::SubIOp>(b.create<memref::DimOp>(operands.rhs, 2), c(b, 1));
  Value columnInTile = b.create<arith::RemUIOp>(tid, c(b, kTile));
  Value column = b.create<arith::AddIOp>(firstColumn, columnInTile);
  Value columnInside = below(b, column, c(b, operands.columns));
  Value readColumn = b.create<arith::MinUIOp>(column, c(b, operands.columns - 1));
  Value firstStepInStage = b.create<arith::DivUIOp>(tid, c(b, kTile));
  forRange(b, c(b, 0), c(b, kStage * kTile / kThreads), [&](Builder& b, Value i) {
    Value stepInStage = b.create<arith::AddIOp>(firstStepInStage,
                                                b.create<arith::MulIOp>(i, c(b, kThreads / kTile)));
    Value step = b.create<arith::AddIOp>(first, stepInStage);
    Value inside = b.create<arith::AndIOp>(columnInside, below(b, step, extent));
    Value x = loadF32(b, operands.rhs,
                      {rhsBatch, rhsHead, b.create<arith::MinUIOp>(step, lastStep), readColumn});
    x = b.create<arith::SelectOp>(inside, roundToTf32(b, x), f32Constant(b, 0));
    b.create<memref::StoreOp>(x, rhsTile, ValueRange{stepInStage, columnInTile});
  });
}

// acc[i * 4 + j] += A_i B_j over the stage's 4 steps of 8, for the warp's row fragments i and
// column fragments j.
SmallVector<Value> MatmulMma::multiplyStage(Builder& b, ValueRange carried) {
  SmallVector<Value> acc(carried.begin(), carried.end());
  auto fragment = [&](int64_t count, auto element) {
    auto type = VectorType::get({count, 1}, b.getF32Type());
    Value v = b.create<arith::ConstantOp>(DenseElementsAttr::get(type, b.getF32FloatAttr(0)));
    for (int64_t k = 0; k < count; ++k)
      v = b.create<vector::InsertOp>(element(k), v, ArrayRef<int64_t>{k, 0});
    return v;
  };
  for (int64_t step = 0; step < kStage; step += 8) {
    SmallVector<Value> a, bFrags;
    for (int64_t i = 0; i < kRowFragments; ++i) {
      Value row = b.create<arith::AddIOp>(add(b, warpRow, 16 * i), g);
      a.push_back(fragment(4, [&](int64_t k) -> Value {
        return b.create<memref::LoadOp>(
            lhsTile, ValueRange{add(b, row, 8 * (k % 2)), add(b, t, step + 4 * (k / 2))});
      }));
    }
    for (int64_t j = 0; j < kColumnFragments; ++j) {
      Value column = b.create<arith::AddIOp>(add(b, warpColumn, 8 * j), g);
      bFrags.push_back(fragment(2, [&](int64_t k) -> Value {
        return b.create<memref::LoadOp>(rhsTile, ValueRange{add(b, t, step + 4 * k), column});
      }));
    }
    for (int64_t i = 0; i < kRowFragments; ++i)
      for (int64_t j = 0; j < kColumnFragments; ++j)
        acc[i * kColumnFragments + j] =
            mmaSyncTf32(b, a[i], bFrags[j], acc[i * kColumnFragments + j]);
  }
  return acc;
}

// out[.., row, column] = C (+ out's element with accumulate) for this lane's elements inside
// out.
void MatmulMma::write(Builder& b, ArrayRef<Value> acc) {
  Value columns = c(b, operands.columns);
  for (int64_t i = 0; i < kRowFragments; ++i)
    for (int64_t r = 0; r < 2; ++r) {
      Value row = b.create<arith::AddIOp>(
          firstRow, b.create<arith::AddIOp>(add(b, warpRow, 16 * i + 8 * r), g));
      for (int64_t j = 0; j < kColumnFragments; ++j)
        for (int64_t k = 0; k < 2; ++k) {
          Value column = b.create<arith::AddIOp>(
              firstColumn, b.create<arith::AddIOp>(add(b, warpColumn, 8 * j + k),
                                                   b.create<arith::MulIOp>(t, c(b, 2))));
          Value inside = b.create<arith::AndIOp>(below(b, row, rows), below(b, column, columns));
          auto guard = b.create<scf::IfOp>(inside, /*withElseRegion=*/false);
          Builder gb = Builder::atBlockBegin(b.getLoc(), guard.thenBlock());
          Value x =
              gb.create<vector::ExtractOp>(acc[i * kColumnFragments + j], ArrayRef<int64_t>{r, k});
          SmallVector<Value> at{batch, head, row, column};
          if (operands.op.getAccumulate())
            x = gb.create<arith::AddFOp>(x, loadF32(gb, operands.out, at));
          storeF32(gb, x, operands.out, at);
        }
    }
}

void MatmulMma::emit(Builder& b) {
  Value rowTiles =
      b.create<arith::CeilDivUIOp>(b.create<memref::DimOp>(operands.out, 2), c(b, kTile));
  Value blocks =
      b.create<arith::MulIOp>(b.create<arith::MulIOp>(b.create<memref::DimOp>(operands.out, 0),
                                                      c(b, operands.out.getType().getDimSize(1))),
                              rowTiles);
  Value one = c(b, 1);
  auto launch = b.create<gpu::LaunchOp>(blocks, c(b, (operands.columns + kTile - 1) / kTile), one,
                                        c(b, kThreads), one, one);
  auto workgroup = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  auto shared = [&](int64_t rows, int64_t pitch) {
    return launch.addWorkgroupAttribution(
        MemRefType::get({rows, pitch}, b.getF32Type(), MemRefLayoutAttrInterface(), workgroup),
        b.getLoc());
  };
  lhsTile = shared(kTile, kLhsPitch);
  rhsTile = shared(kStage, kRhsPitch);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&launch.getBody().front());
  placeBlock(b, launch);
  Value rowEnd = b.create<arith::MinUIOp>(add(b, firstRow, kTile), rows);
  auto type = VectorType::get({2, 2}, b.getF32Type());
  SmallVector<Value> zeros(
      kRowFragments * kColumnFragments,
      b.create<arith::ConstantOp>(DenseElementsAttr::get(type, b.getF32FloatAttr(0))));
  if (!operands.op.getBatchSum()) {
    write(b, multiplyStages(b, operands.batchEntry(b, batch, rowEnd), zeros));
  } else { // the factors' batch entries in order (their batches are equal: the verifier's)
    write(b, foldRange(b, c(b, 0), b.create<memref::DimOp>(operands.lhs, 0), zeros,
                       [&](Builder& bb, Value entry, ValueRange carried) {
                         return multiplyStages(bb, operands.batchEntry(bb, entry, rowEnd), carried);
                       }));
  }
  b.create<gpu::TerminatorOp>();
}

SmallVector<Value> MatmulMma::multiplyStages(Builder& b, const MatmulOperands::BatchEntry& entry,
                                             ValueRange acc) {
  auto stages =
      b.create<scf::ForOp>(c(b, 0), entry.extent, c(b, kStage), acc,
                           [&](OpBuilder& nested, Location loc, Value first, ValueRange carried) {
                             Builder sb(loc, nested);
                             sb.create<gpu::BarrierOp>(); // the last stage's fragments are read
                             stageLhs(sb, entry.lhs, first, entry.extent);
                             stageRhs(sb, entry.rhs, first, entry.extent);
                             sb.create<gpu::BarrierOp>();
                             sb.create<scf::YieldOp>(multiplyStage(sb, carried));
                           });
  return stages.getResults();
}

} // namespace

LogicalResult lowerMatmulToMma(RewriterBase& rewriter, MatmulOp op) {
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  MatmulMma(op).emit(b);
  rewriter.eraseOp(op);
  return success();
}

} // namespace attnc::attn
