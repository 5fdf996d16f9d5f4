#include "Backends/MLIR/LinearAttention.h"

#include "attn/IR/AttnOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

namespace attnc::mlirbackend {
namespace {

constexpr int64_t kDynamic = ShapedType::kDynamic;
// Query rows per chunk under causal: the products within a chunk (C x C scores per row block)
// cost as much as those through the state (F x (d_v + 1) per row) at F = d_v = 64.
constexpr int64_t kChunkRows = 64;

// Chunked rows [N B, heads, C, columns] (AttnLinearOps.td): `outers` = N B, `rows` = C.
struct RowShape {
  Value outers;
  int64_t heads;
  Value rows;
};

// A row buffer's features and, for FAVOR+, the rows [x, 1] they are computed from.
struct FeatureBuffers {
  Value features, rows;
};

class LinearAttentionBuilder {
public:
  LinearAttentionBuilder(ImplicitLocOpBuilder& b, const Spec& spec,
                         const std::map<std::string, Value>& arguments)
      : b(b), spec(spec), arguments(arguments), favor(spec.featureMap == FeatureMap::Favor),
        causal(spec.masks.has(MaskKind::Causal)), features(favor ? spec.features : spec.dK),
        columns(spec.dV + 1) {}

  void build();

private:
  Value allocate(const RowShape& shape, int64_t width);
  FeatureBuffers allocateFeatures(const RowShape& shape);
  Value transposed(Value matrix);
  void emitFeatures(const FeatureBuffers& to, Value x, Value first, Value limit);
  void emitValues(Value to, Value v, Value first, Value limit);
  void matmul(Value lhs, Value rhs, Value out, bool causalSum = false, bool accumulate = false);

  ImplicitLocOpBuilder& b;
  const Spec& spec;
  const std::map<std::string, Value>& arguments;
  const bool favor, causal;
  const int64_t features, columns; // F, and E = d_v + 1: a value row with its 1
  SmallVector<Value> buffers;
};

Value LinearAttentionBuilder::allocate(const RowShape& shape, int64_t width) {
  SmallVector<Value> dynamic{shape.outers};
  SmallVector<int64_t> sizes{kDynamic, shape.heads, kDynamic, width};
  std::optional<int64_t> rows = getConstantIntValue(shape.rows);
  if (rows)
    sizes[2] = *rows;
  else
    dynamic.push_back(shape.rows);
  buffers.push_back(b.create<memref::AllocOp>(MemRefType::get(sizes, b.getF32Type()), dynamic));
  return buffers.back();
}

FeatureBuffers LinearAttentionBuilder::allocateFeatures(const RowShape& shape) {
  FeatureBuffers to{allocate(shape, features), Value()};
  if (favor)
    to.rows = allocate(shape, spec.dK + 1);
  return to;
}

// [.., R, C] as [.., C, R].
Value LinearAttentionBuilder::transposed(Value matrix) {
  auto order = AffineMap::getPermutationMap(ArrayRef<unsigned>{0, 1, 3, 2}, b.getContext());
  return b.create<memref::TransposeOp>(matrix, AffineMapAttr::get(order));
}

// phi of rows first.. of x; FAVOR+: [x, 1], times omega^T, then its positive features.
void LinearAttentionBuilder::emitFeatures(const FeatureBuffers& to, Value x, Value first,
                                          Value limit) {
  if (!favor) {
    b.create<attn::FeatureRowsOp>(x, to.features, first, limit,
                                  spec.featureMap == FeatureMap::Elu1 ? "elu1" : "relu");
    return;
  }
  b.create<attn::FeatureRowsOp>(x, to.rows, first, limit, "value");
  auto rowsType = cast<MemRefType>(to.rows.getType());
  SmallVector<OpFoldResult> sizes;
  for (int64_t d = 0; d < 3; ++d)
    sizes.push_back(rowsType.isDynamicDim(d)
                        ? OpFoldResult(b.create<memref::DimOp>(to.rows, d))
                        : OpFoldResult(b.getIndexAttr(rowsType.getDimSize(d))));
  sizes.push_back(b.getIndexAttr(spec.dK));
  SmallVector<OpFoldResult> zeros(4, b.getIndexAttr(0)), ones(4, b.getIndexAttr(1));
  Value xRows = b.create<memref::SubViewOp>(to.rows, zeros, sizes, ones);
  // omega [F, d_k] as rhs [1, 1, d_k, F]
  Value omega = arguments.at("omega");
  auto omegaType = cast<MemRefType>(omega.getType());
  FailureOr<MemRefType> expanded = memref::ExpandShapeOp::computeExpandedType(
      omegaType, {1, 1, features, spec.dK}, {{0, 1, 2}, {3}});
  Value omegaRows = b.create<memref::ExpandShapeOp>(*expanded, omega,
                                                    ArrayRef<ReassociationIndices>{{0, 1, 2}, {3}});
  matmul(xRows, transposed(omegaRows), to.features);
  b.create<attn::FavorFeaturesOp>(to.rows, to.features, to.features, b.getF64FloatAttr(spec.scale));
}

// [v, 1] of rows first.. of v.
void LinearAttentionBuilder::emitValues(Value to, Value v, Value first, Value limit) {
  b.create<attn::FeatureRowsOp>(v, to, first, limit, "value");
}

void LinearAttentionBuilder::matmul(Value lhs, Value rhs, Value out, bool causalSum,
                                    bool accumulate) {
  auto op = b.create<attn::MatmulOp>(lhs, rhs, out, Value(), Value());
  op.setCausal(causalSum);
  op.setAccumulate(accumulate);
}

// Keys every query row sees (all of them without causal; with it, those before the first
// row's diagonal, j < offset) make the head state P_0; under causal the rest are laid out
// aligned with the query rows, key offset + u beside row u, in chunks of C: row i then sees the
// chunks before its own through the prefix P_c and its own chunk's keys u <= i.
void LinearAttentionBuilder::build() {
  Value q = arguments.at("q"), k = arguments.at("k"), v = arguments.at("v");
  auto lengths = arguments.find("lengths");
  Value limit = spec.masks.has(MaskKind::Padding) ? lengths->second : Value();
  const int64_t heads = spec.heads, kvHeads = spec.kvHeads;
  Value batch = b.create<memref::DimOp>(q, 0), seqQ = b.create<memref::DimOp>(q, 2),
        seqK = b.create<memref::DimOp>(k, 2);
  Value zero = b.create<arith::ConstantIndexOp>(0);

  // Sizes, then every buffer, before the first op (attn-outline-tasks' workspace).
  Value offset, headKeys = seqK, rowsPerChunk = seqQ, outers = batch;
  if (causal) {
    offset = spec.causalAlign == CausalAlign::BottomRight
                 ? b.create<arith::SubIOp>(seqK, seqQ).getResult()
                 : zero;
    headKeys = b.create<arith::MinSIOp>(b.create<arith::MaxSIOp>(offset, zero), seqK);
    rowsPerChunk = b.create<arith::ConstantIndexOp>(kChunkRows);
    outers = b.create<arith::MulIOp>(b.create<arith::CeilDivUIOp>(seqQ, rowsPerChunk), batch);
  }
  const RowShape queryRows{outers, heads, rowsPerChunk}, headRows{batch, kvHeads, headKeys},
      chunkKeys{outers, kvHeads, rowsPerChunk};
  FeatureBuffers phiQ = allocateFeatures(queryRows), headK = allocateFeatures(headRows);
  Value headV = allocate(headRows, columns);
  Value head = allocate({batch, kvHeads, b.create<arith::ConstantIndexOp>(features)}, columns);
  Value total = allocate(queryRows, columns);
  FeatureBuffers keysC, allKeys = headK;
  Value valuesC, sums, scores;
  if (causal) {
    keysC = allocateFeatures(chunkKeys);
    valuesC = allocate(chunkKeys, columns);
    sums = allocate({outers, kvHeads, b.create<arith::ConstantIndexOp>(features)}, columns);
    scores = allocate(queryRows, kChunkRows);
    if (spec.weights)
      allKeys = allocateFeatures({batch, kvHeads, seqK});
  }

  emitFeatures(phiQ, q, zero, Value());
  emitFeatures(headK, k, zero, limit);
  emitValues(headV, v, zero, limit);
  matmul(transposed(headK.features), headV, head); // P_0
  if (causal) {
    emitFeatures(keysC, k, offset, limit);
    emitValues(valuesC, v, offset, limit);
    matmul(transposed(keysC.features), valuesC, sums); // D_c
    b.create<attn::ChunkPrefixOp>(sums, head);         // P_c
    matmul(phiQ.features, sums, total);
    matmul(phiQ.features, transposed(keysC.features), scores);
    matmul(scores, valuesC, total, /*causalSum=*/true, /*accumulate=*/true);
  } else {
    matmul(phiQ.features, head, total);
  }
  b.create<attn::NormalizeRowsOp>(total, arguments.at("o"));
  if (spec.weights) {
    if (causal)
      emitFeatures(allKeys, k, zero, limit);
    b.create<attn::LinearWeightsOp>(phiQ.features, allKeys.features, total, arguments.at("weights"),
                                    causal ? offset : Value());
  }
  for (Value buffer : buffers)
    b.create<memref::DeallocOp>(buffer);
}

} // namespace

void buildLinearAttention(ImplicitLocOpBuilder& b, const Spec& spec,
                          const std::map<std::string, Value>& arguments) {
  LinearAttentionBuilder(b, spec, arguments).build();
}

} // namespace attnc::mlirbackend
