#include "Backends/MLIR/VariantOperands.h"

#include "Backends/MLIR/OperandViews.h"
#include "Backends/MLIR/SpecToAttn.h"
#include "Support/Errors.h"
#include "attn/IR/AttnOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

namespace attnc::mlirbackend {
namespace {

constexpr int64_t kDynamic = ShapedType::kDynamic;

} // namespace

VariantOperands::VariantOperands(ImplicitLocOpBuilder& b, const Spec& spec,
                                 const std::map<std::string, Value>& arguments, DType element,
                                 Products products)
    : spec(spec), arguments(arguments),
      workspaceElement(elementType(*b.getContext(), std::string(dtypeName(element)))) {
  const bool paged = spec.kvCache == KvCache::Paged;
  q = arguments.at("q");
  k = arguments.at(paged ? "k_pages" : "k");
  v = arguments.at(paged ? "v_pages" : "v");
  o = arguments.at("o");
  switch (spec.variant) {
  case Variant::Mha: projectMha(b, products); break;
  case Variant::Bilinear: projectBilinear(b); break;
  case Variant::Additive: projectAdditive(b); break;
  case Variant::Linformer: projectLinformer(b); break;
  default: break;
  }
}

Value VariantOperands::workspace(ImplicitLocOpBuilder& b, ArrayRef<int64_t> shape,
                                 ValueRange dynamicSizes) {
  buffers.push_back(
      b.create<memref::AllocOp>(MemRefType::get(shape, workspaceElement), dynamicSizes));
  return buffers.back();
}

Value VariantOperands::mhaRows(ImplicitLocOpBuilder& b, const char* saved, int64_t width,
                               Value batch, Value seq) {
  if (spec.saveProjections) {
    // The saved tensors are f32 (Abi/Arguments.cpp): the CPU's workspace, which holds any
    // dtype's heads; tensor cores' f16 and bf16 heads would need their own (no row covers it).
    if (!workspaceElement.isF32())
      throw JobError("mlir backend: save_projections keeps mha's heads in f32 tensors, and "
                     "this target computes them in " +
                     std::string(dtypeName(spec.dtype)));
    return arguments.at(saved);
  }
  return workspace(b, {kDynamic, kDynamic, width}, {batch, seq});
}

// Q = x_q W_Q, K = x_k W_K, V = x_v W_V, each [B, T, heads d] with heads side by side, after
// PE(qpos) or PE(j) is added to the inputs under pe=sinusoidal (in the products' packing). The
// projections, and the attention's output [B, Tq, H d_v] that W_O reads, are in the workspace's
// type (save_projections keeps them in the f32 arguments instead).
void VariantOperands::projectMha(ImplicitLocOpBuilder& b, Products products) {
  const Value xq = q, xk = k, xv = v;
  Value batch = b.create<memref::DimOp>(xq, 0);
  Value seqQ = b.create<memref::DimOp>(xq, 1), seqK = b.create<memref::DimOp>(xk, 1);
  const int64_t H = spec.heads, Hkv = spec.kvHeads;
  Value qRows = mhaRows(b, "q_proj", H * spec.dK, batch, seqQ);
  Value kRows = mhaRows(b, "k_proj", Hkv * spec.dK, batch, seqK);
  Value vRows = mhaRows(b, "v_proj", Hkv * spec.dV, batch, seqK);
  concatenatedHeads = mhaRows(b, "o_heads", H * spec.dV, batch, seqQ);

  if (spec.pe == PositionalEncoding::Sinusoidal) {
    keyOffset = b.create<arith::ConstantIndexOp>(0);
    queryOffset = spec.causalAlign == CausalAlign::BottomRight
                      ? b.create<arith::SubIOp>(seqK, seqQ).getResult()
                      : keyOffset;
  }
  auto project = [&](Value x, const char* weight, Value rows, Value offset) {
    b.create<attn::MatmulOp>(withUnitFirst(b, x, false), asOneMatrix(b, arguments.at(weight)),
                             withUnitFirst(b, rows, false), Value(), offset);
  };
  q = headsFirst(b, qRows, H, spec.dK);
  k = headsFirst(b, kRows, Hkv, spec.dK);
  v = headsFirst(b, vRows, Hkv, spec.dV);
  o = headsFirst(b, concatenatedHeads, H, spec.dV);
  if (products == Products::Saved)
    return;
  project(xq, "w_q", qRows, queryOffset);
  project(xk, "w_k", kRows, keyOffset);
  project(xv, "w_v", vRows, keyOffset);
}

// q W per head: [B, H, Tq, d_q] [H, d_q, d_k] -> [B, H, Tq, d_k], the query of q^T W k.
void VariantOperands::projectBilinear(ImplicitLocOpBuilder& b) {
  Value batch = b.create<memref::DimOp>(q, 0), seqQ = b.create<memref::DimOp>(q, 2);
  Value projected = workspace(b, {kDynamic, spec.heads, kDynamic, spec.dK}, {batch, seqQ});
  Value rows = q;
  q = asArgumentType(b, projected);
  b.create<attn::MatmulOp>(rows, withUnitFirst(b, arguments.at("w"), true), projected, Value(),
                           Value());
}

// The hidden rows W1 q and W2 k of Bahdanau's score, both per query head (W2 is indexed by the
// query head under GQA too): [B, H(_kv), T, d] [H, d_attn, d] -> [B, H, T, d_attn], the weights
// in nn.Linear's orientation used transposed; and v_a [H, d_attn] grouped by KV head, as
// attn.attention's score_weights take it.
void VariantOperands::projectAdditive(ImplicitLocOpBuilder& b) {
  Value batch = b.create<memref::DimOp>(q, 0);
  const int64_t H = spec.heads, Hkv = spec.kvHeads;
  const Value queryRows = q, keyRows = k;
  // The workspace and its views before the first product: the lowerings read the attention's
  // sizes and allocate from them before the kernel's first phase (attn-to-online, AdditiveKeys).
  auto workspaceFor = [&](Value rows) {
    return workspace(b, {kDynamic, H, kDynamic, spec.dAttn},
                     {batch, b.create<memref::DimOp>(rows, 2)});
  };
  Value queryHidden = workspaceFor(queryRows), keyHidden = workspaceFor(keyRows);
  q = asArgumentType(b, queryHidden);
  k = asArgumentType(b, keyHidden);
  additiveWeights = expand(b, arguments.at("v_a"), {Hkv, H / Hkv, spec.dAttn}, {{0, 1}, {2}});
  auto project = [&](Value rows, const char* weight, Value hidden) {
    Value w = withUnitFirst(b, arguments.at(weight), true); // [1, H, d_attn, d]
    b.create<attn::MatmulOp>(rows, transposedMatrices(b, w), hidden, Value(), Value());
  };
  project(queryRows, "w1", queryHidden);
  project(keyRows, "w2", keyHidden);
}

// K~ = E K and V~ = F V per KV head over the first lengths[b] keys under padding (all Tk
// without): [H_kv, proj_len, Tk] [B, H_kv, Tk, d] -> [B, H_kv, proj_len, d].
void VariantOperands::projectLinformer(ImplicitLocOpBuilder& b) {
  Value batch = b.create<memref::DimOp>(q, 0);
  const int64_t Hkv = spec.kvHeads, keys = spec.projLen;
  Value projectedK = workspace(b, {kDynamic, Hkv, keys, spec.dK}, {batch});
  Value projectedV = workspace(b, {kDynamic, Hkv, keys, spec.dV}, {batch});
  Value limit = spec.masks.has(MaskKind::Padding) ? arguments.at("lengths") : Value();
  const Value keyRows = k, valueRows = v;
  k = asArgumentType(b, projectedK);
  v = asArgumentType(b, projectedV);
  b.create<attn::MatmulOp>(withUnitFirst(b, arguments.at("e"), true), keyRows, projectedK, limit,
                           Value());
  b.create<attn::MatmulOp>(withUnitFirst(b, arguments.at("f"), true), valueRows, projectedV, limit,
                           Value());
}

void VariantOperands::finish(ImplicitLocOpBuilder& b) const {
  if (concatenatedHeads) // O = Concat(heads) W_O
    b.create<attn::MatmulOp>(withUnitFirst(b, concatenatedHeads, false),
                             asOneMatrix(b, arguments.at("w_o")),
                             withUnitFirst(b, arguments.at("o"), false), Value(), Value());
  release(b);
}

void VariantOperands::release(ImplicitLocOpBuilder& b) const {
  for (Value buffer : buffers)
    b.create<memref::DeallocOp>(buffer);
}

} // namespace attnc::mlirbackend
