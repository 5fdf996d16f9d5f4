#include "halide/AttentionAlgorithm.h"

#include "Support/Errors.h"
#include "Variants/Masks.h"
#include "Variants/Positions.h"

#include <limits>
#include <string>

namespace attnc::halide {
namespace {

using namespace Halide;

Type storageType(DType dtype) {
  switch (dtype) {
  case DType::F32: return Float(32);
  case DType::F16: return Float(16);
  case DType::BF16: return BFloat(16);
  }
  return Float(32);
}

// Halide numbers dimensions innermost first: DLPack [B, H, T, D] is (d, t, h, b) here and
// [B, T, H, D] is (d, h, t, b). Strides are whatever the caller's tensors have.
ImageParam headParam(const Spec& s, const char* name) {
  ImageParam p(storageType(s.dtype), 4, name);
  p.dim(0).set_stride(Expr());
  return p;
}

Expr seqExtent(const ImageParam& p, Layout layout) {
  return p.dim(layout == Layout::Bhsd ? 1 : 2).extent();
}

Expr at(const ImageParam& p, Layout layout, Expr d, Expr t, Expr h, Expr b) {
  return layout == Layout::Bhsd ? p(d, t, h, b) : p(d, h, t, b);
}

// Index into a dimension that is either full or broadcast (extent 1).
Expr broadcastIndex(const ImageParam& p, int dim, Expr index) {
  return min(index, p.dim(dim).extent() - 1);
}

void requireSupported(const Spec& s) {
  auto unsupported = [](const std::string& what) {
    throw UsageError("the halide backend does not support " + what +
                     " yet; use --backend reference for it");
  };
  if (s.variant != Variant::Sdpa)
    unsupported("variant=" + std::string(variantName(s.variant)));
  for (MaskKind k : {MaskKind::BlockSparse, MaskKind::BigBird})
    if (s.masks.has(k))
      unsupported("mask=" + std::string(maskKindName(k)));
  if (s.rope)
    unsupported("rope=true");
  if (s.dropout > 0)
    unsupported("dropout");
  if (s.weights)
    unsupported("weights=true");
}

} // namespace

AttentionAlgorithm buildAttention(const Spec& s, int queryTile, int keyBlock) {
  requireSupported(s);
  AttentionAlgorithm a;
  a.queryTile = queryTile;
  a.keyBlockSize = keyBlock;
  Var d = a.d, i = a.i, row = a.row, tile = a.tile, jj = a.jj, kb = a.kb, h = a.h, b = a.b;

  // Head dims and head counts are compile-time constants, so loops over them have fixed trip
  // counts and vectors need no tails when the dims are multiples of the vector width.
  ImageParam q = headParam(s, "q"), k = headParam(s, "k"), v = headParam(s, "v");
  const int headDim = s.layout == Layout::Bhsd ? 2 : 1;
  q.dim(0)
      .set_bounds(0, static_cast<int>(s.dK))
      .dim(headDim)
      .set_bounds(0, static_cast<int>(s.heads));
  k.dim(0)
      .set_bounds(0, static_cast<int>(s.dK))
      .dim(headDim)
      .set_bounds(0, static_cast<int>(s.kvHeads));
  v.dim(0)
      .set_bounds(0, static_cast<int>(s.dV))
      .dim(headDim)
      .set_bounds(0, static_cast<int>(s.kvHeads));
  a.inputs = {q, k, v};
  a.q = q;
  a.k = k;
  a.v = v;
  ImageParam lengths(Int(32), 1, "lengths"), mask(UInt(8), 4, "mask"),
      bias(storageType(s.dtype), 4, "bias");
  if (s.masks.has(MaskKind::Padding))
    a.inputs.push_back(lengths);
  if (s.masks.has(MaskKind::Tensor)) {
    mask.dim(0).set_stride(Expr());
    a.inputs.push_back(mask);
  }
  if (s.bias) {
    bias.dim(0).set_stride(Expr());
    a.inputs.push_back(bias);
  }

  const Expr seqQ = seqExtent(q, s.layout), seqK = seqExtent(k, s.layout);
  const Expr offset = s.causalAlign == CausalAlign::BottomRight ? seqK - seqQ : Expr(0);
  const Expr group = h / static_cast<int>(s.groupSize()); // the kv head of query head h
  const Expr queryRow = tile * queryTile + row;           // may pass Tq in the last tile
  const Expr queryInRange = min(queryRow, seqQ - 1);      // clamped for loads
  const Expr qpos = queryRow + offset;                    // the query's position among keys
  const Expr key = kb * keyBlock + jj;                    // key index of (kb, jj)
  const Expr keyInRange = min(key, seqK - 1);             // clamped for loads past Tk

  a.query = Func("query");
  a.query(row, d, tile, h, b) =
      cast<float>(at(q, s.layout, d, queryInRange, h, b)) * static_cast<float>(s.scale);

  a.dot = RDom(0, static_cast<int>(s.dK), "dot");
  a.score = Func("score");
  a.score(row, jj, kb, tile, h, b) = 0.0f;
  a.score(row, jj, kb, tile, h, b) +=
      a.query(row, a.dot, tile, h, b) * cast<float>(at(k, s.layout, a.dot, keyInRange, group, b));

  // Modifiers in the reference's order: softcap, ALiBi, bias.
  Expr x = a.score(row, jj, kb, tile, h, b);
  if (s.softcap > 0)
    x = static_cast<float>(s.softcap) * tanh(x / static_cast<float>(s.softcap));
  if (s.alibi) {
    std::vector<double> slopes = positions::alibiSlopes(s.heads);
    Buffer<float> slopeTable(static_cast<int>(slopes.size()), "alibi_slopes");
    for (size_t n = 0; n < slopes.size(); ++n)
      slopeTable(static_cast<int>(n)) = static_cast<float>(slopes[n]);
    x -= slopeTable(h) * cast<float>(abs(qpos - key));
  }
  if (s.bias)
    x += cast<float>(
        bias(keyInRange, queryInRange, broadcastIndex(bias, 2, h), broadcastIndex(bias, 3, b)));

  // Constraints intersect; sparsity patterns unite (docs/spec.md).
  const MaskSet m = s.masks;
  Expr keep = key < seqK;
  if (m.has(MaskKind::Causal))
    keep = keep && masks::causal(qpos, key);
  if (m.has(MaskKind::Padding))
    keep = keep && key < lengths(b);
  if (m.has(MaskKind::Tensor))
    keep = keep && mask(keyInRange, queryInRange, broadcastIndex(mask, 2, h),
                        broadcastIndex(mask, 3, b)) != 0;
  if (m.hasSparsityPattern()) {
    Expr any = cast<bool>(false);
    const Expr left = static_cast<int>(s.windowLeft), right = static_cast<int>(s.windowRight);
    if (m.has(MaskKind::Window))
      any = any || masks::window(qpos, key, left, right);
    if (m.has(MaskKind::Global))
      any = any || masks::global(qpos, key, Expr(static_cast<int>(s.globalTokens)));
    if (m.has(MaskKind::Strided))
      any = any || masks::strided(qpos, key, Expr(static_cast<int>(s.stride)));
    if (m.has(MaskKind::Dilated))
      any = any || masks::dilated(qpos, key, left, right, Expr(static_cast<int>(s.dilation)));
    keep = keep && any;
  }
  a.masked = Func("masked");
  a.masked(jj, row, kb, tile, h, b) = select(keep, max(x, kLowest()), kLowest());

  a.inKey = RDom(0, keyBlock, "in_key");
  a.blockMax = Func("block_max");
  a.blockMax(row, kb, tile, h, b) = kLowest();
  a.blockMax(row, kb, tile, h, b) =
      max(a.blockMax(row, kb, tile, h, b), a.masked(a.inKey, row, kb, tile, h, b));

  a.prob = Func("prob");
  Expr sij = a.masked(jj, row, kb, tile, h, b);
  a.prob(jj, row, kb, tile, h, b) =
      select(sij > kLowest(), exp(sij - a.blockMax(row, kb, tile, h, b)), 0.0f);

  a.blockSum = Func("block_sum");
  a.blockSum(row, kb, tile, h, b) = 0.0f;
  a.blockSum(row, kb, tile, h, b) += a.prob(a.inKey, row, kb, tile, h, b);

  a.blockAcc = Func("block_acc");
  a.blockAcc(d, row, kb, tile, h, b) = 0.0f;
  Expr valueKey = min(kb * keyBlock + a.inKey, seqK - 1);
  a.blockAcc(d, row, kb, tile, h, b) +=
      a.prob(a.inKey, row, kb, tile, h, b) * cast<float>(at(v, s.layout, d, valueKey, group, b));

  // Blocks the tile can use at all, from the mask's form: Halide trims the block loop to them.
  a.blocks = RDom(0, (seqK + keyBlock - 1) / keyBlock, "blocks");
  const Expr first = a.blocks.x * keyBlock, last = first + keyBlock - 1;
  const Expr firstPos = tile * queryTile + offset;
  const Expr lastPos = min(tile * queryTile + queryTile, seqQ) - 1 + offset;
  Expr live = cast<bool>(true);
  if (m.has(MaskKind::Causal))
    live = live && first <= lastPos;
  if (m.has(MaskKind::Padding))
    live = live && first < lengths(b);
  if (m.has(MaskKind::Window) && !m.has(MaskKind::Global) && !m.has(MaskKind::Strided) &&
      !m.has(MaskKind::Dilated))
    live = live && last >= firstPos - static_cast<int>(s.windowLeft) &&
           first <= lastPos + static_cast<int>(s.windowRight);
  a.blocks.where(live);

  // The streaming merge: state = (M, L, A), one A per head-dim element (M and L repeat along d
  // so the three share one loop nest; their exps are per row per block, a small cost).
  a.state = Func("state");
  a.state(d, row, tile, h, b) = Tuple(kLowest(), 0.0f, 0.0f);
  {
    FuncRef current = a.state(d, row, tile, h, b);
    Expr M = current[0], L = current[1], A = current[2];
    Expr mb = a.blockMax(row, a.blocks, tile, h, b);
    // M' = max(M, m_kb); of e^(M - M') and e^(m_kb - M') one is 1 and the other e^-|M - m_kb|.
    Expr next = max(M, mb);
    Expr grew = mb > M, shrink = exp(-abs(M - mb));
    Expr old = select(grew, shrink, 1.0f), fresh = select(grew, 1.0f, shrink);
    a.state(d, row, tile, h, b) =
        Tuple(next, L * old + a.blockSum(row, a.blocks, tile, h, b) * fresh,
              A * old + a.blockAcc(d, row, a.blocks, tile, h, b) * fresh);
  }

  // o = A / L; a row with no key left has L = 0 and gives o = 0, lse = -inf.
  const Expr rowOf = i % queryTile, tileOf = i / queryTile;
  Expr total = a.state(d, rowOf, tileOf, h, b)[1];
  Expr out = select(total > 0, a.state(d, rowOf, tileOf, h, b)[2] / total, 0.0f);
  a.o = Func("o");
  if (s.layout == Layout::Bhsd)
    a.o(d, i, h, b) = cast(storageType(s.dtype), out);
  else
    a.o(d, h, i, b) = cast(storageType(s.dtype), out);
  a.o.output_buffer().dim(0).set_stride(Expr()).dim(0).set_bounds(0, static_cast<int>(s.dV));
  a.outputs = {a.o};
  if (s.lse) {
    a.lse = Func("lse");
    Expr rowTotal = a.state(0, rowOf, tileOf, h, b)[1];
    a.lse(i, h, b) = select(rowTotal > 0, a.state(0, rowOf, tileOf, h, b)[0] + log(rowTotal),
                            Expr(-std::numeric_limits<float>::infinity()));
    a.lse.output_buffer().dim(0).set_stride(Expr());
    a.outputs.push_back(a.lse);
  }
  return a;
}

} // namespace attnc::halide
