#include "Backends/MLIR/LinearAttention.h"

#include "Backends/MLIR/OperandViews.h"
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
  struct Sizes {
    Value zero, batch, seqK;
    Value offset;       // causal: Tk - Tq (bottom_right) or 0 (top_left)
    Value headKeys;     // keys every row sees: Tk, or clamp(offset, 0, Tk) under causal
    Value rowsPerChunk; // C: kChunkRows under causal, else Tq
    Value outers;       // N B
  };
  // phi(Q); the head's phi(K) and [V, 1], its state P_0; the rows [n, z]; under causal the
  // aligned keys' phi(K) and [V, 1], their chunk states and a chunk's scores; the weights' keys.
  struct Buffers {
    FeatureBuffers phiQ, headK, keysC, allKeys;
    Value headV, head, total, valuesC, sums, scores;
  };
  Sizes measure();
  Buffers allocateBuffers(const Sizes& sizes);
  void emitCausalRows(const Buffers& buffers, const Sizes& sizes, Value limit);
  Value allocate(const RowShape& shape, int64_t width);
  FeatureBuffers allocateFeatures(const RowShape& shape);
  void emitFeatures(const FeatureBuffers& to, Value x, Value first, Value limit);
  void emitValues(Value to, Value v, Value first, Value limit);
  void matmul(Value lhs, Value rhs, Value out, bool causalSum = false, bool accumulate = false);

  ImplicitLocOpBuilder& b;
  const Spec& spec;
  const std::map<std::string, Value>& arguments;
  const bool favor, causal;
  const int64_t features, columns; // F, and E = d_v + 1: a value row with its 1
  SmallVector<Value> allocated;    // freed at the end
};

Value LinearAttentionBuilder::allocate(const RowShape& shape, int64_t width) {
  SmallVector<Value> dynamic{shape.outers};
  SmallVector<int64_t> sizes{kDynamic, shape.heads, kDynamic, width};
  std::optional<int64_t> rows = getConstantIntValue(shape.rows);
  if (rows)
    sizes[2] = *rows;
  else
    dynamic.push_back(shape.rows);
  allocated.push_back(b.create<memref::AllocOp>(MemRefType::get(sizes, b.getF32Type()), dynamic));
  return allocated.back();
}

FeatureBuffers LinearAttentionBuilder::allocateFeatures(const RowShape& shape) {
  FeatureBuffers to{allocate(shape, features), Value()};
  if (favor)
    to.rows = allocate(shape, spec.dK + 1);
  return to;
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
  SmallVector<OpFoldResult> sizes = memref::getMixedSizes(b, b.getLoc(), to.rows);
  sizes.back() = b.getIndexAttr(spec.dK); // the rows without their existence flag
  SmallVector<OpFoldResult> zeros(4, b.getIndexAttr(0)), ones(4, b.getIndexAttr(1));
  Value xRows = b.create<memref::SubViewOp>(to.rows, zeros, sizes, ones);
  // omega [F, d_k] as rhs [1, 1, d_k, F]
  matmul(xRows, transposedMatrices(b, asOneMatrix(b, arguments.at("omega"))), to.features);
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

// The sizes the buffers are made from: under causal, key j sits beside query row j - offset.
LinearAttentionBuilder::Sizes LinearAttentionBuilder::measure() {
  Value q = arguments.at("q");
  Sizes sizes;
  sizes.zero = b.create<arith::ConstantIndexOp>(0);
  sizes.batch = b.create<memref::DimOp>(q, 0);
  sizes.seqK = b.create<memref::DimOp>(arguments.at("k"), 2);
  Value seqQ = b.create<memref::DimOp>(q, 2);
  sizes.headKeys = sizes.seqK;
  sizes.rowsPerChunk = seqQ;
  sizes.outers = sizes.batch;
  if (causal) {
    sizes.offset = spec.causalAlign == CausalAlign::BottomRight
                       ? b.create<arith::SubIOp>(sizes.seqK, seqQ).getResult()
                       : sizes.zero;
    sizes.headKeys =
        b.create<arith::MinSIOp>(b.create<arith::MaxSIOp>(sizes.offset, sizes.zero), sizes.seqK);
    sizes.rowsPerChunk = b.create<arith::ConstantIndexOp>(kChunkRows);
    sizes.outers = b.create<arith::MulIOp>(b.create<arith::CeilDivUIOp>(seqQ, sizes.rowsPerChunk),
                                           sizes.batch);
  }
  return sizes;
}

// Every buffer, before the first op (attn-outline-tasks' workspace).
LinearAttentionBuilder::Buffers LinearAttentionBuilder::allocateBuffers(const Sizes& sizes) {
  const RowShape queryRows{sizes.outers, spec.heads, sizes.rowsPerChunk},
      headRows{sizes.batch, spec.kvHeads, sizes.headKeys},
      chunkKeys{sizes.outers, spec.kvHeads, sizes.rowsPerChunk};
  Value featureRows = b.create<arith::ConstantIndexOp>(features);
  Buffers buffers;
  buffers.phiQ = allocateFeatures(queryRows);
  buffers.headK = buffers.allKeys = allocateFeatures(headRows);
  buffers.headV = allocate(headRows, columns);
  buffers.head = allocate({sizes.batch, spec.kvHeads, featureRows}, columns);
  buffers.total = allocate(queryRows, columns);
  if (causal) {
    buffers.keysC = allocateFeatures(chunkKeys);
    buffers.valuesC = allocate(chunkKeys, columns);
    buffers.sums = allocate({sizes.outers, spec.kvHeads, featureRows}, columns);
    buffers.scores = allocate(queryRows, kChunkRows);
    if (spec.weights)
      buffers.allKeys = allocateFeatures({sizes.batch, spec.kvHeads, sizes.seqK});
  }
  return buffers;
}

// Rows of chunk c: phi(Q_c) P_c with P_c the prefix of the chunk states D_c' from P_0, plus the
// chunk's own keys u <= i.
void LinearAttentionBuilder::emitCausalRows(const Buffers& buffers, const Sizes& sizes,
                                            Value limit) {
  emitFeatures(buffers.keysC, arguments.at("k"), sizes.offset, limit);
  emitValues(buffers.valuesC, arguments.at("v"), sizes.offset, limit);
  matmul(transposedMatrices(b, buffers.keysC.features), buffers.valuesC, buffers.sums); // D_c
  b.create<attn::ChunkPrefixOp>(buffers.sums, buffers.head);                 // P_c
  matmul(buffers.phiQ.features, buffers.sums, buffers.total);
  matmul(buffers.phiQ.features, transposedMatrices(b, buffers.keysC.features), buffers.scores);
  matmul(buffers.scores, buffers.valuesC, buffers.total, /*causalSum=*/true, /*accumulate=*/true);
}

// Keys every query row sees (all of them without causal; with it, those before the first
// row's diagonal, j < offset) make the head state P_0; under causal the rest are laid out
// aligned with the query rows, key offset + u beside row u, in chunks of C: row i then sees the
// chunks before its own through the prefix P_c and its own chunk's keys u <= i.
void LinearAttentionBuilder::build() {
  Value limit = spec.masks.has(MaskKind::Padding) ? arguments.at("lengths") : Value();
  const Sizes sizes = measure();
  const Buffers buffers = allocateBuffers(sizes);
  emitFeatures(buffers.phiQ, arguments.at("q"), sizes.zero, Value());
  emitFeatures(buffers.headK, arguments.at("k"), sizes.zero, limit);
  emitValues(buffers.headV, arguments.at("v"), sizes.zero, limit);
  b.create<attn::MatmulOp>(transposedMatrices(b, buffers.headK.features), buffers.headV,
                           buffers.head, limit, Value()); // P_0, over a batch's keys only
  if (causal)
    emitCausalRows(buffers, sizes, limit);
  else
    matmul(buffers.phiQ.features, buffers.head, buffers.total);
  b.create<attn::NormalizeRowsOp>(buffers.total, arguments.at("o"));
  if (spec.weights) {
    if (causal)
      emitFeatures(buffers.allKeys, arguments.at("k"), sizes.zero, limit);
    b.create<attn::LinearWeightsOp>(buffers.phiQ.features, buffers.allKeys.features, buffers.total,
                                    arguments.at("weights"), causal ? sizes.offset : Value());
  }
  for (Value buffer : allocated)
    b.create<memref::DeallocOp>(buffer);
}

} // namespace

void buildLinearAttention(ImplicitLocOpBuilder& b, const Spec& spec,
                          const std::map<std::string, Value>& arguments) {
  LinearAttentionBuilder(b, spec, arguments).build();
}

} // namespace attnc::mlirbackend
