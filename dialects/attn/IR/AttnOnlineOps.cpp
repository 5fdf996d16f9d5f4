//===- AttnOnlineOps.cpp - verifiers of the online-softmax ops ----------------===//
#include "attn/IR/AttnOps.h"
#include "attn/IR/ScoreAttrs.h"

using namespace mlir;
using namespace attnc::attn;

namespace {

// The state triple: acc [nb, nh, d_v, rows], max and sum [nb, nh, rows].
LogicalResult verifyState(Operation* op, MemRefType acc, MemRefType max, MemRefType sum) {
  ArrayRef<int64_t> a = acc.getShape();
  if (max.getShape() != sum.getShape())
    return op->emitOpError() << "max and sum must have the same shape";
  ArrayRef<int64_t> m = max.getShape();
  if (a[0] != m[0] || a[1] != m[1] || a[3] != m[2])
    return op->emitOpError() << "acc [nb, nh, d_v, rows] and max/sum [nb, nh, rows] disagree";
  return success();
}

LogicalResult verifyDomain(Operation* op, size_t offsets, size_t sizes, size_t rank) {
  if (offsets != rank || sizes != rank)
    return op->emitOpError() << "needs " << rank << " offsets and " << rank << " sizes, got "
                             << offsets << " and " << sizes;
  return success();
}

// The query heads of a score op: a positive multiple of the key heads (GQA groups).
LogicalResult verifyNumHeads(Operation* op, int64_t heads, MemRefType key) {
  if (heads <= 0 || ShapedType::isDynamic(key.getDimSize(1)) || heads % key.getDimSize(1) != 0)
    return op->emitOpError() << "num_heads " << heads << " must be a multiple of the key heads "
                             << key.getDimSize(1);
  return success();
}

// A paged cache's block table [B, Tk / page_size] and lengths [B] come together.
LogicalResult verifyPages(Operation* op, Value blockTable, Value seqLens) {
  if (!blockTable != !seqLens)
    return op->emitOpError() << "a paged cache needs both block_table and seq_lens";
  return success();
}

// Quantized rows (int8, fp8 E4M3) come with their scales, float rows without.
LogicalResult verifyScales(Operation* op, MemRefType rows, Value scale, const char* what) {
  if (isOtherFloat8(rows.getElementType()))
    return op->emitOpError() << what << "'s 8-bit floats must be f8E4M3FN";
  if (isQuantizedCacheElement(rows.getElementType()) != static_cast<bool>(scale))
    return op->emitOpError() << what << " is int8 or fp8 E4M3 exactly when it has scales";
  return success();
}

} // namespace

LogicalResult OnlineInitOp::verify() {
  return verifyState(*this, getAcc().getType(), getMax().getType(), getSum().getType());
}

LogicalResult PackQueryOp::verify() {
  const int64_t dk = getQuery().getType().getDimSize(3);
  const int64_t packedRows = getPacked().getType().getDimSize(0);
  if (!ShapedType::isDynamic(dk) && !ShapedType::isDynamic(packedRows) && packedRows < dk)
    return emitOpError() << "packed tile must be [at least d_k = " << dk << ", rows]";
  if (getScale().convertToDouble() <= 0)
    return emitOpError() << "scale must be positive";
  return success();
}

LogicalResult RopeOp::verify() {
  MemRefType in = getInput().getType(), out = getOutput().getType();
  for (int64_t d = 0; d < 4; ++d)
    if (!ShapedType::isDynamic(in.getDimSize(d)) && !ShapedType::isDynamic(out.getDimSize(d)) &&
        in.getDimSize(d) != out.getDimSize(d))
      return emitOpError() << "input and output must have the same shape";
  if (ShapedType::isDynamic(in.getDimSize(3)))
    return emitOpError() << "the head dim must be static";
  return verifyRope(*this, getStyle(), getTheta().convertToDouble(), getDims(), in.getDimSize(3));
}

LogicalResult OnlineUpdateOp::verify() {
  if (failed(verifyState(*this, getAcc().getType(), getMax().getType(), getSum().getType())) ||
      failed(verifyDomain(*this, getOffsets().size(), getSizes().size(), 4)) ||
      failed(verifyScoreAttrs(*this)) || failed(verifyPages(*this, getBlockTable(), getSeqLens())))
    return failure();
  MemRefType k = getKey().getType(), v = getValue().getType();
  const int64_t heads = getNumHeads();
  if (failed(verifyNumHeads(*this, heads, k)) ||
      failed(verifyScales(*this, k, getKeyScale(), "the key")) ||
      failed(verifyScales(*this, v, getValueScale(), "the value")) ||
      failed(verifyScoreWeights(*this, heads, k, v.getDimSize(1))))
    return failure();
  int64_t dk = k.getDimSize(3);
  if (hasPackedQuery()) {
    if (getQuery().getType().getDimSize(0) != dk)
      return emitOpError() << "a packed query must be [d_k = " << dk << ", rows]";
    if (!getQuery().getType().getElementType().isF32())
      return emitOpError() << "a packed query must be f32";
  } else if (getQuery().getType().getDimSize(3) != dk ||
             getQuery().getType().getDimSize(1) != heads) {
    return emitOpError() << "query must be [B, num_heads, Tq, d_k] with the key's d_k";
  }
  if (getAcc().getType().getDimSize(2) != v.getDimSize(3))
    return emitOpError() << "acc must be [nb, nh, d_v, rows] with the value's d_v";
  if (auto maxKeys = getMaxKeys(); maxKeys && *maxKeys <= 0)
    return emitOpError() << "max_keys must be positive";
  return success();
}

LogicalResult WeightsOp::verify() {
  if (failed(verifyDomain(*this, getOffsets().size(), getSizes().size(), 4)) ||
      failed(verifyScoreAttrs(*this)) || failed(verifyPages(*this, getBlockTable(), getSeqLens())))
    return failure();
  MemRefType q = getQuery().getType(), k = getKey().getType();
  const int64_t heads = getNumHeads();
  if (failed(verifyNumHeads(*this, heads, k)) ||
      failed(verifyScales(*this, k, getKeyScale(), "the key")) ||
      failed(verifyScoreWeights(*this, heads, k, /*valueHeads=*/0)))
    return failure();
  if (q.getDimSize(3) != k.getDimSize(3) || q.getDimSize(1) != heads)
    return emitOpError() << "query must be [B, num_heads, Tq, d_k] with the key's d_k";
  if (getWeights().getType().getDimSize(1) != heads)
    return emitOpError() << "weights [B, H, Tq, Tk] need num_heads heads";
  if (Value sinks = getSinks(); sinks && cast<MemRefType>(sinks.getType()).getDimSize(0) != heads)
    return emitOpError() << "sinks must have num_heads elements";
  return success();
}

LogicalResult OnlineFinalizeOp::verify() {
  if (failed(verifyState(*this, getAcc().getType(), getMax().getType(), getSum().getType())) ||
      failed(verifyDomain(*this, getOffsets().size(), getSizes().size(), 3)))
    return failure();
  if (getOutput().getType().getDimSize(3) != getAcc().getType().getDimSize(2))
    return emitOpError() << "output d_v must match acc [nb, nh, d_v, rows]";
  if (Value sinks = getSinks(); sinks && cast<MemRefType>(sinks.getType()).getDimSize(0) !=
                                             getOutput().getType().getDimSize(1))
    return emitOpError() << "sinks must have one element per head of the output";
  return success();
}
