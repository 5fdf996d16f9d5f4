//===- LowerLinear.cpp - linear attention's row ops as task loops ---------------===//
//
// attn.feature_rows, favor_features, chunk_prefix, normalize_rows and linear_weights each lower
// to a phase of its own, in place of the op: one task per `rows` rows of a (batch or chunk,
// head), their elements in scalar loops. Their work is O(T F) (the weights' O(Tq Tk F)); the
// products between them (attn.matmul) carry the attention's arithmetic.
//
//===---------------------------------------------------------------------------===//
#include "attn/IR/AttnOps.h"
#include "attn/Kit/Builders.h"
#include "attn/Kit/Elements.h"
#include "attn/Transforms/Transforms.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <cmath>

using namespace mlir;

namespace attnc::attn {
namespace {

using Builder = ImplicitLocOpBuilder;

// A task's rows [firstRow, rowEnd) of head `head` in batch (or chunk-and-batch) `outer`.
struct RowTask {
  Value outer, head, firstRow, rowEnd;
};

// An scf.forall at b's point over (outer < outers, head < heads, tiles of `rows` of `extent`
// rows), task = (outer heads + head) tiles + tile; b is left at the end of its body.
RowTask rowTasks(Builder& b, Value outers, int64_t heads, Value extent, int64_t rows) {
  Value tiles = b.create<arith::CeilDivUIOp>(extent, indexConstant(b, rows));
  Value tasks =
      b.create<arith::MulIOp>(b.create<arith::MulIOp>(outers, indexConstant(b, heads)), tiles);
  auto forall = b.create<scf::ForallOp>(ArrayRef<OpFoldResult>{tasks}, ValueRange{}, std::nullopt);
  b.setInsertionPoint(forall.getBody()->getTerminator());
  Value task = forall.getInductionVar(0);
  Value rest = b.create<arith::DivUIOp>(task, tiles);
  RowTask t;
  t.head = b.create<arith::RemUIOp>(rest, indexConstant(b, heads));
  t.outer = b.create<arith::DivUIOp>(rest, indexConstant(b, heads));
  t.firstRow =
      b.create<arith::MulIOp>(b.create<arith::RemUIOp>(task, tiles), indexConstant(b, rows));
  t.rowEnd =
      b.create<arith::MinUIOp>(b.create<arith::AddIOp>(t.firstRow, indexConstant(b, rows)), extent);
  return t;
}

Value dim(Builder& b, Value buffer, int64_t d) {
  return b.create<memref::DimOp>(buffer, d);
}
int64_t staticDim(Value buffer, int64_t d) {
  return cast<MemRefType>(buffer.getType()).getDimSize(d);
}

// (x / y, x mod y): a chunked row's chunk and row (y = C), a chunk-and-batch's chunk and batch
// (y = B).
std::pair<Value, Value> divMod(Builder& b, Value x, Value y) {
  return {b.create<arith::DivUIOp>(x, y), b.create<arith::RemUIOp>(x, y)};
}

// The feature map's element: elu(x) + 1 = (x > 0 ? x + 1 : e^x), or max(x, 0).
Value featureOf(Builder& b, StringRef map, Value x) {
  Value zero = f32Constant(b, 0);
  if (map == "relu")
    return b.create<arith::MaximumFOp>(x, zero);
  Value positive = b.create<arith::CmpFOp>(arith::CmpFPredicate::OGT, x, zero);
  return b.create<arith::SelectOp>(positive, b.create<arith::AddFOp>(x, f32Constant(b, 1)),
                                   b.create<math::ExpOp>(x));
}

void lowerFeatureRows(Builder& b, FeatureRowsOp op, int64_t rows) {
  Value x = op.getX(), out = op.getOut();
  const int64_t heads = staticDim(out, 1), dims = staticDim(x, 3), features = staticDim(out, 3);
  Value batch = dim(b, x, 0), seq = dim(b, x, 2), rowsPerChunk = dim(b, out, 2);
  RowTask task = rowTasks(b, dim(b, out, 0), heads, rowsPerChunk, rows);
  auto [chunk, bi] = divMod(b, task.outer, batch);
  Value chunkStart =
      b.create<arith::AddIOp>(op.getFirst(), b.create<arith::MulIOp>(chunk, rowsPerChunk));
  forRange(b, task.firstRow, task.rowEnd, [&](Builder& rb, Value t) {
    // Source row j = first + n C + t exists where 0 <= j < min(T, limit[b]).
    Value j = rb.create<arith::AddIOp>(chunkStart, t);
    Value end = seq;
    if (Value limit = op.getLimit())
      end = rb.create<arith::MinSIOp>(
          end, rb.create<arith::IndexCastOp>(rb.getIndexType(),
                                             rb.create<memref::LoadOp>(limit, ValueRange{bi})));
    Value exists = rb.create<arith::AndIOp>(
        rb.create<arith::CmpIOp>(arith::CmpIPredicate::slt, j, end),
        rb.create<arith::CmpIOp>(arith::CmpIPredicate::sge, j, indexConstant(rb, 0)));
    auto branch = rb.create<scf::IfOp>(exists, /*withElseRegion=*/true);
    Builder tb = Builder::atBlockBegin(rb.getLoc(), branch.thenBlock());
    forRange(tb, indexConstant(tb, 0), indexConstant(tb, dims), [&](Builder& cb, Value c) {
      Value value = loadF32(cb, x, {bi, task.head, j, c});
      if (op.getMap() != "value")
        value = featureOf(cb, op.getMap(), value);
      cb.create<memref::StoreOp>(value, out, ValueRange{task.outer, task.head, t, c});
    });
    if (op.getMap() == "value")
      tb.create<memref::StoreOp>(f32Constant(tb, 1), out,
                                 ValueRange{task.outer, task.head, t, indexConstant(tb, dims)});
    Builder eb = Builder::atBlockBegin(rb.getLoc(), branch.elseBlock());
    forRange(eb, indexConstant(eb, 0), indexConstant(eb, features), [&](Builder& cb, Value c) {
      cb.create<memref::StoreOp>(f32Constant(cb, 0), out, ValueRange{task.outer, task.head, t, c});
    });
  });
}

// out[f] = rows[d] exp(sqrt(s) projected[f] - s |rows[:d]|^2 / 2) / sqrt(F).
void lowerFavorFeatures(Builder& b, FavorFeaturesOp op, int64_t rows) {
  Value in = op.getRows(), projected = op.getProjected(), out = op.getOut();
  const int64_t heads = staticDim(out, 1), dims = staticDim(in, 3) - 1,
                features = staticDim(out, 3);
  const double scale = op.getScale().convertToDouble();
  RowTask task = rowTasks(b, dim(b, out, 0), heads, dim(b, out, 2), rows);
  forRange(b, task.firstRow, task.rowEnd, [&](Builder& rb, Value t) {
    auto at = [&](Value c) { return SmallVector<Value>{task.outer, task.head, t, c}; };
    Value norm =
        foldRange(rb, indexConstant(rb, 0), indexConstant(rb, dims), ValueRange{f32Constant(rb, 0)},
                  [&](Builder& cb, Value c, ValueRange sum) -> SmallVector<Value> {
                    Value x = cb.create<memref::LoadOp>(in, at(c));
                    return {cb.create<math::FmaOp>(x, x, sum[0])};
                  })[0];
    Value shift = rb.create<arith::MulFOp>(norm, f32Constant(rb, scale / 2));
    Value exists = rb.create<memref::LoadOp>(in, at(indexConstant(rb, dims)));
    Value factor =
        rb.create<arith::MulFOp>(exists, f32Constant(rb, 1 / std::sqrt(double(features))));
    forRange(rb, indexConstant(rb, 0), indexConstant(rb, features), [&](Builder& cb, Value f) {
      Value y = cb.create<memref::LoadOp>(projected, at(f));
      Value exponent = cb.create<arith::SubFOp>(
          cb.create<arith::MulFOp>(y, f32Constant(cb, std::sqrt(scale))), shift);
      cb.create<memref::StoreOp>(cb.create<arith::MulFOp>(factor, cb.create<math::ExpOp>(exponent)),
                                 out, at(f));
    });
  });
}

// A task per `rows` rows f of a head's state: for each column, the running sum over chunks.
void lowerChunkPrefix(Builder& b, ChunkPrefixOp op, int64_t rows) {
  Value sums = op.getSums(), initial = op.getInitial();
  const int64_t heads = staticDim(sums, 1), columns = staticDim(sums, 3);
  Value batch = dim(b, initial, 0);
  Value chunks = b.create<arith::DivUIOp>(dim(b, sums, 0), batch);
  RowTask task = rowTasks(b, batch, heads, dim(b, sums, 2), rows);
  forRange(b, task.firstRow, task.rowEnd, [&](Builder& rb, Value f) {
    forRange(rb, indexConstant(rb, 0), indexConstant(rb, columns), [&](Builder& cb, Value e) {
      Value first = cb.create<memref::LoadOp>(initial, ValueRange{task.outer, task.head, f, e});
      foldRange(cb, indexConstant(cb, 0), chunks, ValueRange{first},
                [&](Builder& nb, Value n, ValueRange running) -> SmallVector<Value> {
                  SmallVector<Value> at{
                      nb.create<arith::AddIOp>(nb.create<arith::MulIOp>(n, batch), task.outer),
                      task.head, f, e};
                  Value chunkSum = nb.create<memref::LoadOp>(sums, at);
                  nb.create<memref::StoreOp>(running[0], sums, at);
                  return {nb.create<arith::AddFOp>(running[0], chunkSum)};
                });
    });
  });
}

// Row i's place in a chunked buffer of batch b, [n B + b, h, t], and a column of it.
struct ChunkedRow {
  Value outer, head, row;
  SmallVector<Value> at(Value column) const { return {outer, head, row, column}; }
};

ChunkedRow chunkedRow(Builder& b, Value chunked, Value batch, Value bi, Value head, Value i) {
  auto [chunk, t] = divMod(b, i, dim(b, chunked, 2));
  return {b.create<arith::AddIOp>(b.create<arith::MulIOp>(chunk, batch), bi), head, t};
}

// n / z, or 0 where z is 0.
Value dividedOrZero(Builder& b, Value n, Value z) {
  Value zero = f32Constant(b, 0);
  Value nonzero = b.create<arith::CmpFOp>(arith::CmpFPredicate::UNE, z, zero);
  return b.create<arith::SelectOp>(nonzero, b.create<arith::DivFOp>(n, z), zero);
}

void lowerNormalizeRows(Builder& b, NormalizeRowsOp op, int64_t rows) {
  Value total = op.getTotal(), out = op.getOut();
  const int64_t heads = staticDim(out, 1), columns = staticDim(total, 3) - 1;
  Value batch = dim(b, out, 0);
  RowTask task = rowTasks(b, batch, heads, dim(b, out, 2), rows);
  forRange(b, task.firstRow, task.rowEnd, [&](Builder& rb, Value i) {
    const ChunkedRow row = chunkedRow(rb, total, batch, task.outer, task.head, i);
    Value z = rb.create<memref::LoadOp>(total, row.at(indexConstant(rb, columns)));
    forRange(rb, indexConstant(rb, 0), indexConstant(rb, columns), [&](Builder& cb, Value e) {
      storeF32(cb, dividedOrZero(cb, cb.create<memref::LoadOp>(total, row.at(e)), z), out,
               {task.outer, task.head, i, e});
    });
  });
}

// Row i's weights over the keys it sees, [0, end), and 0 past them.
void lowerLinearWeights(Builder& b, LinearWeightsOp op, int64_t rows) {
  Value queries = op.getQueries(), keys = op.getKeys(), total = op.getTotal(), out = op.getOut();
  const int64_t heads = staticDim(queries, 1), features = staticDim(queries, 3);
  const int64_t group = heads / staticDim(keys, 1), columns = staticDim(total, 3) - 1;
  Value batch = dim(b, out, 0), seqK = dim(b, out, 3);
  RowTask task = rowTasks(b, batch, heads, dim(b, out, 2), rows);
  Value kvHead = b.create<arith::DivUIOp>(task.head, indexConstant(b, group));
  forRange(b, task.firstRow, task.rowEnd, [&](Builder& rb, Value i) {
    const ChunkedRow row = chunkedRow(rb, total, batch, task.outer, task.head, i);
    Value z = rb.create<memref::LoadOp>(total, row.at(indexConstant(rb, columns)));
    Value end = seqK;
    if (Value offset = op.getCausalOffset()) // j <= i + offset, within [0, Tk]
      end = rb.create<arith::MinSIOp>(
          rb.create<arith::MaxSIOp>(
              rb.create<arith::AddIOp>(rb.create<arith::AddIOp>(i, offset), indexConstant(rb, 1)),
              indexConstant(rb, 0)),
          seqK);
    forRange(rb, indexConstant(rb, 0), end, [&](Builder& jb, Value j) {
      Value score = foldRange(
          jb, indexConstant(jb, 0), indexConstant(jb, features), ValueRange{f32Constant(jb, 0)},
          [&](Builder& fb, Value f, ValueRange sum) -> SmallVector<Value> {
            Value q = fb.create<memref::LoadOp>(queries, row.at(f));
            Value k = fb.create<memref::LoadOp>(keys, ValueRange{task.outer, kvHead, j, f});
            return {fb.create<math::FmaOp>(q, k, sum[0])};
          })[0];
      storeF32(jb, dividedOrZero(jb, score, z), out, {task.outer, task.head, i, j});
    });
    forRange(rb, end, seqK, [&](Builder& jb, Value j) {
      storeF32(jb, f32Constant(jb, 0), out, {task.outer, task.head, i, j});
    });
  });
}

// Lowers `op` with `lower` at its place and erases it.
template <typename Op, typename Lower>
void lowerInPlace(RewriterBase& rewriter, Op op, int64_t rows, Lower lower) {
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  Builder b(op.getLoc(), rewriter);
  lower(b, op, rows);
  rewriter.eraseOp(op);
}

} // namespace

LogicalResult lowerLinearOps(RewriterBase& rewriter, Operation* root, int64_t rows) {
  if (rows <= 0)
    return root->emitOpError() << "lower_linear: rows (" << rows << ") must be positive";
  SmallVector<Operation*> ops;
  root->walk([&](Operation* op) {
    if (isa<FeatureRowsOp, FavorFeaturesOp, ChunkPrefixOp, NormalizeRowsOp, LinearWeightsOp>(op))
      ops.push_back(op);
  });
  for (Operation* op : ops) {
    if (auto features = dyn_cast<FeatureRowsOp>(op))
      lowerInPlace(rewriter, features, rows, lowerFeatureRows);
    else if (auto favor = dyn_cast<FavorFeaturesOp>(op))
      lowerInPlace(rewriter, favor, rows, lowerFavorFeatures);
    else if (auto prefix = dyn_cast<ChunkPrefixOp>(op))
      lowerInPlace(rewriter, prefix, rows, lowerChunkPrefix);
    else if (auto normalize = dyn_cast<NormalizeRowsOp>(op))
      lowerInPlace(rewriter, normalize, rows, lowerNormalizeRows);
    else
      lowerInPlace(rewriter, cast<LinearWeightsOp>(op), rows, lowerLinearWeights);
  }
  return success();
}

} // namespace attnc::attn
