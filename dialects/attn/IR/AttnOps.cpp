//===- AttnOps.cpp - attn dialect operations ---------------------------------===//
#include "attn/IR/AttnOps.h"

#include "attn/IR/ScoreAttrs.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

#include <tuple>

using namespace mlir;
using namespace attnc::attn;

#include "attn/IR/AttnInterfaces.cpp.inc"
#define GET_OP_CLASSES
#include "attn/IR/AttnOps.cpp.inc"

namespace {

// Sizes agree when equal or when either is dynamic (known only at run time).
bool compatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

} // namespace

LogicalResult attnc::attn::verifyRope(Operation* op, StringRef style, double theta, int64_t dims,
                                      int64_t headDim) {
  if (style != "half" && style != "interleaved")
    return op->emitOpError() << "rope style must be \"half\" or \"interleaved\", got \"" << style
                             << "\"";
  if (!(theta > 0))
    return op->emitOpError() << "rope theta must be positive, got " << theta;
  if (dims <= 0 || dims % 2 != 0 || dims > headDim)
    return op->emitOpError() << "rope dims must be even and in [2, " << headDim << "], got "
                             << dims;
  return success();
}

LogicalResult AttentionOp::verify() {
  auto q = getQuery().getType(), k = getKey().getType(), v = getValue().getType();
  auto o = getOutput().getType();
  for (auto [name, type] : {std::pair{"query", q}, {"key", k}, {"value", v}, {"output", o}})
    if (type.getRank() != 4)
      return emitOpError() << name << " must be rank 4 ([B, heads, T, d]), got rank "
                           << type.getRank();
  ArrayRef<int64_t> qs = q.getShape(), ks = k.getShape(), vs = v.getShape(), os = o.getShape();
  if (getQueryEnds() && !getRope())
    return emitOpError() << "query_ends places the rotated queries; it needs rope";
  if (getQueryEnds() && getQueryEnds().getType().getRank() != 1)
    return emitOpError() << "query_ends must be rank 1 ([B] i32), got rank "
                         << getQueryEnds().getType().getRank();
  // Head counts and head dims are compile-time constants; B, Tq and Tk may be dynamic.
  for (auto [name, size] :
       {std::pair{"query heads", qs[1]}, {"key heads", ks[1]}, {"d_k", qs[3]}, {"d_v", vs[3]}})
    if (ShapedType::isDynamic(size))
      return emitOpError() << name << " must be static";
  // Additive keys have a head per query head (verifyScoreWeights), other keys the value's.
  if ((!getScoreWeights() && ks[1] != vs[1]) || !compatible(ks[2], vs[2]) ||
      !compatible(ks[0], vs[0]))
    return emitOpError() << "key and value must agree in batch, length and (without "
                            "score_weights) heads";
  if (qs[3] != ks[3])
    return emitOpError() << "query d_k " << qs[3] << " differs from key d_k " << ks[3];
  if (qs[1] % ks[1] != 0)
    return emitOpError() << "key/value heads " << ks[1] << " must divide query heads " << qs[1];
  // A paged cache's keys are [pages, H_kv, page_size, d]: no batch dim to match.
  if ((!getBlockTable() && !compatible(qs[0], ks[0])) || !compatible(os[0], qs[0]) ||
      os[1] != qs[1] ||
      !compatible(os[2], qs[2]) || os[3] != vs[3])
    return emitOpError() << "output must be [B, heads, Tq, d_v] of the query and value";
  if (failed(verifyScoreAttrs(*this)) || failed(verifyScoreWeights(*this, qs[1], k, vs[1])))
    return failure();
  if (getRope() &&
      failed(verifyRope(*this, *getRope(), getRopeTheta().convertToDouble(),
                        getRopeDims().value_or(qs[3]), qs[3])))
    return failure();
  if (getRopeDims() && !getRope())
    return emitOpError() << "rope_dims needs rope";
  if (auto lse = getLse()) {
    ArrayRef<int64_t> ls = cast<RankedTensorType>(lse.getType()).getShape();
    if (ls.size() != 3 || !compatible(ls[0], qs[0]) || ls[1] != qs[1] || !compatible(ls[2], qs[2]))
      return emitOpError() << "lse must be [B, heads, Tq]";
  }
  for (auto [rows, scale, what] : {std::tuple{getKey(), getKeyScale(), "key"},
                                   std::tuple{getValue(), getValueScale(), "value"}}) {
    Type element = cast<RankedTensorType>(rows.getType()).getElementType();
    if (isOtherFloat8(element))
      return emitOpError() << "the " << what << "'s 8-bit floats must be f8E4M3FN";
    if (isQuantizedCacheElement(element) != static_cast<bool>(scale))
      return emitOpError() << "the " << what
                           << " is int8 or fp8 E4M3 exactly when it has scales";
  }
  if (!getBlockTable() != !getSeqLens())
    return emitOpError() << "a paged cache needs both block_table and seq_lens";
  if (Value table = getBlockTable(); table && cast<RankedTensorType>(table.getType()).getRank() != 2)
    return emitOpError() << "block_table must be [B, Tk / page_size]";
  if (Value sinks = getSinks()) {
    ArrayRef<int64_t> ss = cast<RankedTensorType>(sinks.getType()).getShape();
    if (ss.size() != 1 || ss[0] != qs[1])
      return emitOpError() << "sinks must be [heads] (" << qs[1] << ")";
  }
  if (auto weights = getWeights()) {
    ArrayRef<int64_t> ws = cast<RankedTensorType>(weights.getType()).getShape();
    if (ws.size() != 4 || !compatible(ws[0], qs[0]) || ws[1] != qs[1] ||
        !compatible(ws[2], qs[2]) || (!getBlockTable() && !compatible(ws[3], ks[2])))
      return emitOpError() << "weights must be [B, heads, Tq, Tk]";
  }
  return success();
}

LogicalResult AuxLoadOp::verify() {
  Operation* parent = getOperation()->getParentOp(); // ParentOneOf: a score op
  OperandRange aux = isa<AttentionOp>(parent) ? cast<AttentionOp>(parent).getAux()
                                              : cast<ScoreOpInterface>(parent).getAux();
  if (getAux() >= aux.size())
    return emitOpError() << "reads aux tensor " << getAux() << " of an op that has "
                         << aux.size();
  auto tensor = cast<ShapedType>(aux[getAux()].getType());
  if (static_cast<int64_t>(getIndices().size()) != tensor.getRank())
    return emitOpError() << "takes " << tensor.getRank() << " indices for aux tensor "
                         << getAux() << ", got " << getIndices().size();
  if (getResult().getType() != tensor.getElementType())
    return emitOpError() << "result must be the aux tensor's element type, "
                         << tensor.getElementType();
  return success();
}
