//===- LowerRope.cpp - attn.rope as a parallel loop over rows ------------------===//
//
// RoPE touches each query and key element once per call, against d_k x Tk work per query row
// in the attention, so it lowers to plain loops (which LLVM vectorizes) in a task loop of its
// own: a phase of the kernel that runs before the attention's. A task rotates `rows` rows of
// one batch for every head: the angles depend on the position and the pair only, so their
// cosines and sines are formed once per row and serve every head.
//
//===---------------------------------------------------------------------------===//
#include "Semantics/Positions.h"
#include "attn/IR/AttnOps.h"
#include "attn/Kit/Angles.h"
#include "attn/Kit/Builders.h"
#include "attn/Kit/Elements.h"
#include "attn/Transforms/Transforms.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

namespace attnc::attn {
namespace {

// The pair p's two dims: (p, p + dims/2) for "half", (2p, 2p + 1) for "interleaved".
std::pair<Value, Value> pairDims(ImplicitLocOpBuilder& b, RopeOp op, Value pair) {
  if (op.getStyle() == "half") {
    Value second = b.create<arith::AddIOp>(pair, indexConstant(b, op.getDims() / 2));
    return {pair, second};
  }
  Value first = b.create<arith::MulIOp>(pair, indexConstant(b, 2));
  return {first, b.create<arith::AddIOp>(first, indexConstant(b, 1))};
}

} // namespace

FailureOr<scf::ForallOp> lowerRope(RewriterBase& rewriter, RopeOp op, int64_t rows) {
  if (rows <= 0)
    return op.emitOpError() << "lower_rope: a task must rotate at least one row";
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  Value input = op.getInput(), output = op.getOutput();
  const int64_t dims = op.getDims(), pairs = dims / 2;
  const int64_t headDim = op.getInput().getType().getDimSize(3);
  Value zero = indexConstant(b, 0);
  Value batch = b.create<memref::DimOp>(input, 0);
  Value heads = b.create<memref::DimOp>(input, 1);
  Value length = b.create<memref::DimOp>(input, 2);
  Value tileRows = indexConstant(b, rows);
  Value chunks = b.create<arith::CeilDivUIOp>(length, tileRows);
  Value tasks = b.create<arith::MulIOp>(batch, chunks);
  auto forall = b.create<scf::ForallOp>(ArrayRef<OpFoldResult>{tasks}, ValueRange{}, std::nullopt);

  b.setInsertionPointToStart(forall.getBody());
  Value task = forall.getInductionVar(0);
  Value batchIndex = b.create<arith::DivUIOp>(task, chunks);
  Value first = b.create<arith::MulIOp>(b.create<arith::RemUIOp>(task, chunks), tileRows);
  Value last = b.create<arith::MinUIOp>(b.create<arith::AddIOp>(first, tileRows), length);
  // The rows' position offset in this batch: offset, plus ends[b] when given.
  Value offset = op.getOffset();
  if (Value ends = op.getEnds())
    offset = b.create<arith::AddIOp>(
        offset, b.create<arith::IndexCastOp>(
                    b.getIndexType(), b.create<memref::LoadOp>(ends, ValueRange{batchIndex})));

  // The frequencies theta^(-2p/dims) as the reference computes them (f64), and the row's
  // cosines and sines, in stack buffers.
  const double theta = op.getTheta().convertToDouble();
  SmallVector<double> frequencies;
  for (int64_t p = 0; p < pairs; ++p)
    frequencies.push_back(positions::ropeAngle(1, p, dims, theta));
  Value frequency = f64Table(b, frequencies);
  Value cosines = b.create<memref::AllocaOp>(MemRefType::get({pairs}, b.getF32Type()));
  Value sines = b.create<memref::AllocaOp>(MemRefType::get({pairs}, b.getF32Type()));

  Value pairCount = indexConstant(b, pairs);
  forRange(b, first, last, [&](ImplicitLocOpBuilder& rb, Value t) {
    Value position = positionAsF64(rb, rb.create<arith::AddIOp>(t, offset));
    forRange(rb, zero, pairCount, [&](ImplicitLocOpBuilder& pb, Value p) {
      Value angle = pb.create<arith::MulFOp>(
          position, pb.create<memref::LoadOp>(frequency, ValueRange{p}));
      auto [c, s] = cosSin(pb, angle);
      pb.create<memref::StoreOp>(c, cosines, ValueRange{p});
      // R^T: the rotation by the opposite angle, whose sine is -s.
      pb.create<memref::StoreOp>(op.getTransposed() ? Value(pb.create<arith::NegFOp>(s)) : s, sines,
                                 ValueRange{p});
    });
    forRange(rb, zero, heads, [&](ImplicitLocOpBuilder& hb, Value h) {
      // (x_a, x_b) -> (x_a c - x_b s, x_a s + x_b c)
      forRange(hb, zero, pairCount, [&](ImplicitLocOpBuilder& pb, Value p) {
        auto [a, bDim] = pairDims(pb, op, p);
        Value xa = loadF32(pb, input, {batchIndex, h, t, a});
        Value xb = loadF32(pb, input, {batchIndex, h, t, bDim});
        Value c = pb.create<memref::LoadOp>(cosines, ValueRange{p});
        Value s = pb.create<memref::LoadOp>(sines, ValueRange{p});
        Value ra = pb.create<arith::SubFOp>(pb.create<arith::MulFOp>(xa, c),
                                            pb.create<arith::MulFOp>(xb, s));
        Value rbValue = pb.create<arith::AddFOp>(pb.create<arith::MulFOp>(xa, s),
                                                 pb.create<arith::MulFOp>(xb, c));
        storeF32(pb, ra, output, {batchIndex, h, t, a});
        storeF32(pb, rbValue, output, {batchIndex, h, t, bDim});
      });
      forRange(
          hb, indexConstant(hb, dims), indexConstant(hb, headDim),
          [&](ImplicitLocOpBuilder& cb, Value d) {
            storeF32(cb, loadF32(cb, input, {batchIndex, h, t, d}), output, {batchIndex, h, t, d});
          });
    });
  });
  rewriter.eraseOp(op);
  return forall;
}

} // namespace attnc::attn
