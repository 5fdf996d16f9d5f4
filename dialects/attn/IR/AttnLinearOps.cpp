//===- AttnLinearOps.cpp - verifiers of linear attention's ops -----------------===//
#include "attn/IR/AttnOps.h"

using namespace mlir;
using namespace attnc::attn;

namespace {

// Static, positive heads (dim 1) and columns (dim 3: features F, a row [n, z] of E, a row's
// dims), which the lowerings take as constants: the task count and the loops over a row.
LogicalResult verifyStaticHeadsAndColumns(Operation* op, MemRefType type, StringRef name) {
  for (int64_t d : {1, 3})
    if (type.isDynamicDim(d) || type.getDimSize(d) < 1)
      return op->emitOpError() << name << " must have static, positive heads and columns";
  return success();
}

// Chunked rows of the same chunks, heads and rows: dims 0 to 2 agree where static.
LogicalResult verifySameRows(Operation* op, MemRefType a, MemRefType b, StringRef names) {
  for (int64_t d = 0; d < 3; ++d)
    if (extentsDisagree(a.getDimSize(d), b.getDimSize(d)))
      return op->emitOpError() << names << " must have the same chunks, heads and rows";
  return success();
}

// Rows `in` made into rows `out` head by head: both with static heads and columns, the same
// heads.
LogicalResult verifyRowsToRows(Operation* op, MemRefType in, MemRefType out, StringRef inName) {
  if (failed(verifyStaticHeadsAndColumns(op, in, inName)) ||
      failed(verifyStaticHeadsAndColumns(op, out, "out")))
    return failure();
  if (extentsDisagree(in.getDimSize(1), out.getDimSize(1)))
    return op->emitOpError() << inName << " and out must have the same heads";
  return success();
}

} // namespace

LogicalResult FeatureRowsOp::verify() {
  MemRefType x = getX().getType(), out = getOut().getType();
  if (failed(verifyRowsToRows(*this, x, out, "x")))
    return failure();
  const int64_t dims = x.getDimSize(3), features = out.getDimSize(3);
  if (getMap() == "elu1" || getMap() == "relu") {
    if (extentsDisagree(dims, features))
      return emitOpError() << "map " << getMap() << " keeps the row's " << dims << " dims, out has "
                           << features;
  } else if (getMap() == "value") {
    if (!ShapedType::isDynamic(dims) && dims + 1 != features)
      return emitOpError() << "map value appends a 1 to the row's " << dims << " dims, out has "
                           << features;
  } else {
    return emitOpError() << "map must be elu1, relu or value, not " << getMap();
  }
  return success();
}

LogicalResult FavorFeaturesOp::verify() {
  MemRefType rows = getRows().getType(), projected = getProjected().getType(),
             out = getOut().getType();
  if (failed(verifyStaticHeadsAndColumns(*this, rows, "rows")) ||
      failed(verifyStaticHeadsAndColumns(*this, out, "out")) ||
      failed(verifySameRows(*this, rows, projected, "rows and projected")) ||
      failed(verifySameRows(*this, rows, out, "rows and out")))
    return failure();
  if (rows.getDimSize(3) < 2)
    return emitOpError() << "rows must hold a row and its existence flag (at least 2 dims)";
  if (projected.getShape() != out.getShape())
    return emitOpError() << "projected and out must have the same shape";
  if (!(getScale().convertToDouble() > 0))
    return emitOpError() << "scale must be positive";
  return success();
}

LogicalResult ChunkPrefixOp::verify() {
  MemRefType sums = getSums().getType(), initial = getInitial().getType();
  if (failed(verifyStaticHeadsAndColumns(*this, sums, "sums")))
    return failure();
  for (int64_t d = 1; d < 4; ++d)
    if (extentsDisagree(sums.getDimSize(d), initial.getDimSize(d)))
      return emitOpError() << "sums and initial must have the same heads, rows and columns";
  return success();
}

LogicalResult NormalizeRowsOp::verify() {
  MemRefType total = getTotal().getType(), out = getOut().getType();
  if (failed(verifyRowsToRows(*this, total, out, "total")))
    return failure();
  if (extentsDisagree(total.getDimSize(3) - 1, out.getDimSize(3)))
    return emitOpError() << "out's rows must be total's without its last column (the "
                            "denominator)";
  return success();
}

LogicalResult LinearWeightsOp::verify() {
  MemRefType queries = getQueries().getType(), keys = getKeys().getType(),
             total = getTotal().getType(), out = getOut().getType();
  if (failed(verifyStaticHeadsAndColumns(*this, queries, "queries")) ||
      failed(verifyStaticHeadsAndColumns(*this, total, "total")) ||
      failed(verifySameRows(*this, queries, total, "queries and total")))
    return failure();
  if (extentsDisagree(queries.getDimSize(3), keys.getDimSize(3)))
    return emitOpError() << "queries and keys must have the same features";
  const int64_t heads = queries.getDimSize(1), kvHeads = keys.getDimSize(1);
  if (ShapedType::isDynamic(heads) || ShapedType::isDynamic(kvHeads) || kvHeads < 1 ||
      heads % kvHeads != 0)
    return emitOpError() << "keys' heads (" << kvHeads << ") must be static and divide the "
                         << "queries' (" << heads << ")";
  if (extentsDisagree(out.getDimSize(1), heads))
    return emitOpError() << "out and queries must have the same heads";
  if (extentsDisagree(keys.getDimSize(2), out.getDimSize(3)))
    return emitOpError() << "out must have a column per key";
  return success();
}
