//===- WarpAdds.cpp - a warp's adds into memory in a fixed order, no atomics --===//
#include "attn/Transforms/WarpAdds.h"

#include "attn/Kit/Builders.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;

namespace attnc::attn {
namespace {

Value i32Constant(ImplicitLocOpBuilder& b, int32_t value) {
  return b.create<arith::ConstantIntOp>(value, 32);
}

Value shuffle(ImplicitLocOpBuilder& b, Value x, Value source, gpu::ShuffleMode mode) {
  return b.create<gpu::ShuffleOp>(x, source, i32Constant(b, kWarpSize), mode).getShuffleResult();
}

// The lanes where `predicate` holds, as the bits of an i32.
Value ballot(ImplicitLocOpBuilder& b, Value predicate) {
  return b.create<NVVM::VoteBallotOp>(b.getI32Type(), i32Constant(b, -1), predicate);
}

// buffer[row, offset] += sum where `store`.
void addWhere(ImplicitLocOpBuilder& b, Value store, Value buffer, Value row, Value offset,
              Value sum) {
  auto ifStore = b.create<scf::IfOp>(store, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifStore.thenBlock());
  const SmallVector<Value, 2> element{
      row, b.create<arith::IndexCastOp>(b.getIndexType(), offset).getResult()};
  Value old = b.create<memref::LoadOp>(buffer, element);
  b.create<memref::StoreOp>(b.create<arith::AddFOp>(old, sum), buffer, element);
}

// The sum of x over the warp's lanes by xor shuffles: one association, whatever the run.
Value warpSum(ImplicitLocOpBuilder& b, Value x) {
  for (int32_t mask = kWarpSize / 2; mask > 0; mask /= 2)
    x = b.create<arith::AddFOp>(x, shuffle(b, x, i32Constant(b, mask), gpu::ShuffleMode::XOR));
  return x;
}

// The terms of the lanes whose offset is this lane's, summed in lane order, and whether no
// lower lane has that offset.
struct LaneOrderSum {
  Value sum, first;
};
LaneOrderSum laneOrderSum(ImplicitLocOpBuilder& b, Value laneI32, Value offset, Value term) {
  const SmallVector<Value> folded = foldRange(
      b, indexConstant(b, 0), indexConstant(b, kWarpSize),
      {f32Constant(b, 0), b.create<arith::ConstantIntOp>(1, 1)},
      [&](ImplicitLocOpBuilder& sb, Value source, ValueRange acc) {
        Value from = sb.create<arith::IndexCastOp>(sb.getI32Type(), source);
        Value same = sb.create<arith::CmpIOp>(
            arith::CmpIPredicate::eq, shuffle(sb, offset, from, gpu::ShuffleMode::IDX), offset);
        Value its = sb.create<arith::SelectOp>(same, shuffle(sb, term, from, gpu::ShuffleMode::IDX),
                                               f32Constant(sb, 0));
        Value lower = sb.create<arith::AndIOp>(
            same, sb.create<arith::CmpIOp>(arith::CmpIPredicate::ult, from, laneI32));
        return SmallVector<Value>{
            sb.create<arith::AddFOp>(acc[0], its),
            sb.create<arith::SelectOp>(lower, sb.create<arith::ConstantIntOp>(0, 1), acc[1])};
      });
  return {folded[0], folded[1]};
}

} // namespace

void syncWarp(ImplicitLocOpBuilder& b) {
  b.create<NVVM::SyncWarpOp>(i32Constant(b, -1));
}

void addInLaneOrder(ImplicitLocOpBuilder& b, Value lane, Value buffer, Value row, Value offset,
                    Value term) {
  Value laneI32 = b.create<arith::IndexCastOp>(b.getI32Type(), lane);
  Value live = b.create<arith::CmpIOp>(arith::CmpIPredicate::sge, offset,
                                       b.create<arith::ConstantIntOp>(0, 64));
  // The first live lane and its offset. With none live, cttz(0) = 32, whose shuffle reads lane
  // 0 (shfl.idx takes the source lane's low 5 bits): every lane then agrees, and none stores.
  Value leader = b.create<math::CountTrailingZerosOp>(ballot(b, live));
  Value leaderOffset = shuffle(b, offset, leader, gpu::ShuffleMode::IDX);
  Value agrees = b.create<arith::OrIOp>(
      b.create<arith::XOrIOp>(live, b.create<arith::ConstantIntOp>(1, 1)),
      b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, offset, leaderOffset));
  Value uniform =
      b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, ballot(b, agrees), i32Constant(b, -1));
  auto ifUniform = b.create<scf::IfOp>(uniform, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifUniform.thenBlock());
    Value sum = warpSum(b, b.create<arith::SelectOp>(live, term, f32Constant(b, 0)));
    addWhere(b, b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, laneI32, leader), buffer, row,
             offset, sum);
    b.setInsertionPointToStart(ifUniform.elseBlock());
    const LaneOrderSum ordered = laneOrderSum(b, laneI32, offset, term);
    addWhere(b, b.create<arith::AndIOp>(ordered.first, live), buffer, row, offset, ordered.sum);
  }
  syncWarp(b);
}

} // namespace attnc::attn
