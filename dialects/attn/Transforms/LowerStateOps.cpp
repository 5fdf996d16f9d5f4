//===- LowerStateOps.cpp - online_init, pack_query, online_finalize to loops --===//
//
// These ops touch each state element once per query tile, against d_k x keys work in the
// update, so they lower to plain scalar loops that work for any domain.
//
//===---------------------------------------------------------------------------===//
#include "attn/IR/AttnOps.h"
#include "attn/Kit/Builders.h"
#include "attn/Kit/Elements.h"
#include "attn/Kit/OnlineState.h"
#include "attn/Transforms/LowerStateOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <limits>

using namespace mlir;

namespace attnc::attn {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Stores `value` into every element of `buffer`.
void fill(ImplicitLocOpBuilder& b, Value buffer, Value value) {
  auto type = cast<MemRefType>(buffer.getType());
  SmallVector<Value> indices;
  std::function<void(ImplicitLocOpBuilder&, int64_t)> nest = [&](ImplicitLocOpBuilder& ib,
                                                                 int64_t dim) {
    if (dim == type.getRank()) {
      ib.create<memref::StoreOp>(value, buffer, indices);
      return;
    }
    Value extent = ib.create<memref::DimOp>(buffer, dim);
    forRange(ib, indexConstant(ib, 0), extent, [&](ImplicitLocOpBuilder& inner, Value i) {
      indices.push_back(i);
      nest(inner, dim + 1);
      indices.pop_back();
    });
  };
  nest(b, 0);
}

} // namespace

void lowerInit(ImplicitLocOpBuilder& b, OnlineInitOp op) {
  fill(b, op.getAcc(), f32Constant(b, 0));
  fill(b, op.getMax(), f32Constant(b, -kInf));
  fill(b, op.getSum(), f32Constant(b, 0));
}

// packed[c, r] = scale * q[b, h, i + r, c] for r < rows, 0 for the rows past the end.
void lowerPack(ImplicitLocOpBuilder& b, PackQueryOp op) {
  Value zero = indexConstant(b, 0);
  Value dk = b.create<memref::DimOp>(op.getPacked(), 0);
  Value width = b.create<memref::DimOp>(op.getPacked(), 1);
  Value scale = f32Constant(b, op.getScale().convertToDouble());
  forRange(b, zero, op.getRows(), [&](ImplicitLocOpBuilder& ib, Value r) {
    Value row = ib.create<arith::AddIOp>(op.getRow(), r);
    forRange(ib, zero, dk, [&](ImplicitLocOpBuilder& ic, Value c) {
      Value q = loadF32(ic, op.getQuery(), {op.getBatch(), op.getHead(), row, c});
      ic.create<memref::StoreOp>(ic.create<arith::MulFOp>(q, scale), op.getPacked(),
                                 ValueRange{c, r});
    });
  });
  forRange(b, op.getRows(), width, [&](ImplicitLocOpBuilder& ib, Value r) {
    forRange(ib, zero, dk, [&](ImplicitLocOpBuilder& ic, Value c) {
      ic.create<memref::StoreOp>(f32Constant(ic, 0), op.getPacked(), ValueRange{c, r});
    });
  });
}

// o = acc / sum and lse = max + c + log(sum); a row with sum = 0 kept nothing: o = 0,
// lse = -inf. With sinks, the row's sink is folded into (max, sum, acc) first.
void lowerFinalize(ImplicitLocOpBuilder& b, OnlineFinalizeOp op) {
  const OnlineState state;
  Value zero = indexConstant(b, 0);
  ValueRange offsets = op.getOffsets(), sizes = op.getSizes();
  Value dv = indexConstant(b, op.getAcc().getType().getDimSize(2));
  forRange(b, zero, sizes[0], [&](ImplicitLocOpBuilder& b0, Value nb) {
    forRange(b0, zero, sizes[1], [&](ImplicitLocOpBuilder& b1, Value nh) {
      forRange(b1, zero, sizes[2], [&](ImplicitLocOpBuilder& ib, Value r) {
        Value batch = ib.create<arith::AddIOp>(offsets[0], nb);
        Value head = ib.create<arith::AddIOp>(offsets[1], nh);
        Value row = ib.create<arith::AddIOp>(offsets[2], r);
        Value sum = ib.create<memref::LoadOp>(op.getSum(), ValueRange{nb, nh, r});
        Value max = ib.create<memref::LoadOp>(op.getMax(), ValueRange{nb, nh, r});
        Value sink;
        if (Value sinks = op.getSinks())
          sink = ib.create<memref::LoadOp>(sinks, ValueRange{head});
        FinishedRow finished = state.finish(ib, max, sum, sink);
        forRange(ib, zero, dv, [&](ImplicitLocOpBuilder& ic, Value c) {
          Value a = ic.create<memref::LoadOp>(op.getAcc(), ValueRange{nb, nh, c, r});
          storeF32(ic, ic.create<arith::MulFOp>(a, finished.inverse), op.getOutput(),
                   {batch, head, row, c});
        });
        if (Value lse = op.getLse())
          ib.create<memref::StoreOp>(state.finishedLse(ib, finished.max, finished.sum), lse,
                                     ValueRange{batch, head, row});
      });
    });
  });
}

} // namespace attnc::attn
