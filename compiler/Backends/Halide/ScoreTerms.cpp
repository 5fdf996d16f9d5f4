#include "Backends/Halide/ScoreTerms.h"

#include "Abi/Arguments.h"
#include "Spec/BuiltinExpressions.h"

#include "Semantics/Masks.h"
#include "Semantics/Positions.h"
#include "Semantics/Random.h"

#include <cmath>

namespace attnc::halide {
namespace {

using namespace Halide;

// Halide numbers dimensions innermost first: DLPack [B, H, T, D] is (d, t, h, b) here and
// [B, T, H, D] is (d, h, t, b); mha's [B, T, d_model] is (m, t, b). Head dims and head counts
// are compile-time constants, so loops over them have fixed trip counts; strides are whatever
// the caller's tensors have.
ImageParam headParam(const Spec& s, const char* name, int64_t dim, int64_t heads) {
  if (s.variant == Variant::Mha) {
    ImageParam p(storageType(s.dtype), 3, name);
    p.dim(0).set_stride(Expr()).set_bounds(0, static_cast<int>(s.dModel));
    return p;
  }
  ImageParam p(storageType(s.dtype), 4, name);
  const int headDim = s.layout == Layout::Bhsd ? 2 : 1;
  p.dim(0).set_stride(Expr()).set_bounds(0, static_cast<int>(dim));
  p.dim(headDim).set_bounds(0, static_cast<int>(heads));
  return p;
}

// Index into a dimension that is either full or broadcast (extent 1).
Expr broadcastIndex(const ImageParam& p, int dim, Expr index) {
  return min(index, p.dim(dim).extent() - 1);
}

Expr u32(Expr x) {
  return cast<uint32_t>(x);
}

// Philox under the spec's seed, in stream `stream` (Semantics/Random.h).
std::array<Expr, 4> philox(std::array<Expr, 4> counter, uint64_t seed, uint32_t stream) {
  const uint64_t key = random::streamKey(seed, stream);
  return halide::philox(counter, static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32));
}

} // namespace

Type storageType(DType dtype) {
  switch (dtype) {
  case DType::F32: return Float(32);
  case DType::F16: return Float(16);
  case DType::BF16: return BFloat(16);
  }
  return Float(32);
}

ScoreTerms::ScoreTerms(const Spec& s)
    : spec_(s), q_(headParam(s, "q", s.dQ, s.heads)), k_(headParam(s, "k", s.dK, s.kvHeads)),
      v_(headParam(s, "v", s.dV, s.kvHeads)), lengths_(Int(32), 1, "lengths"),
      mask_(UInt(8), 4, "mask"), bias_(storageType(s.dtype), 4, "bias"),
      layout_(UInt(8), 3, "block_layout") {
  // Manifest order (Abi/Arguments.cpp): q, k, v, lengths, mask, block_layout, bias, aux.
  inputs_ = {q_, k_, v_};
  if (s.masks.has(MaskKind::Padding))
    inputs_.push_back(lengths_);
  if (s.masks.has(MaskKind::Tensor)) {
    mask_.dim(0).set_stride(Expr());
    inputs_.push_back(mask_);
  }
  if (s.masks.has(MaskKind::BlockSparse)) {
    layout_.dim(0).set_stride(Expr());
    inputs_.push_back(layout_);
  }
  if (s.bias) {
    bias_.dim(0).set_stride(Expr());
    inputs_.push_back(bias_);
  }
  for (const AuxTensor& a : s.aux) {
    ImageParam p(a.elementType == expr::Type::Int ? Int(32) : Float(32),
                 static_cast<int>(a.dims.size()), a.name);
    p.dim(0).set_stride(Expr());
    aux_.emplace(a.name, p);
    inputs_.push_back(p);
  }
  auxSummaries_ = std::make_unique<AuxSummaries>(s, aux_);
  modifiers_ = modifiersAsExpression(s);
  dropout_ = dropoutAsExpression(s);
  if (s.bias)
    builtinInputs_.emplace("bias", bias_);
  // The variant's parameters (w_q, w1, e, omega, ...), as the manifest declares them; constant
  // extents are bounds Halide can use, Tk (Linformer's E and F) is known at run time.
  for (const Argument& a : kernelArguments(s)) {
    if (a.role != ArgumentRole::Param)
      continue;
    ImageParam p(storageType(s.dtype), static_cast<int>(a.shape.size()), a.name);
    for (size_t k = 0; k < a.shape.size(); ++k)
      if (!a.shape[k].symbol)
        p.dim(static_cast<int>(a.shape.size() - 1 - k)).set_bounds(0, static_cast<int>(a.shape[k].value));
    params_.emplace(a.name, p);
    inputs_.push_back(p);
  }
  const int seqDim = s.layout == Layout::Bhsd || s.variant == Variant::Mha ? 1 : 2;
  seqQ_ = q_.dim(seqDim).extent();
  seqK_ = k_.dim(seqDim).extent();
  keys_ = s.variant == Variant::Linformer ? Expr(static_cast<int>(s.projLen)) : seqK_;
  offset_ = s.causalAlign == CausalAlign::BottomRight ? seqK_ - seqQ_ : Expr(0);

  Var r("r"), qb("qb"), h("h"), pair("pair"), pos("pos");
  if (s.masks.has(MaskKind::BigBird)) {
    // random::bigbirdRandomBlock: word r % 4 at counter (r / 4, qb, h, 0), mod the key blocks.
    Expr keyBlocks = u32((seqK_ + static_cast<int>(s.block) - 1) / static_cast<int>(s.block));
    auto x =
        philox({u32(r / 4), u32(qb), u32(h), Expr(uint32_t{0})}, *s.seed, random::kBigBirdStream);
    bigbirdRandom_ = Func("bigbird_random");
    bigbirdRandom_(r, qb, h) = cast<int>(philoxWord(x, r) % keyBlocks);
  }
  if (s.rope) {
    // The angle pos * theta^(-2p/rope_dims) in f64, as the reference computes it, then f32.
    Buffer<double> frequency(static_cast<int>(s.ropeDims / 2), "rope_frequency");
    for (int p = 0; p < s.ropeDims / 2; ++p)
      frequency(p) = positions::ropeAngle(1, p, s.ropeDims, s.ropeTheta);
    Expr angle = cast<double>(pos) * frequency(pair);
    rope_ = Func("rope");
    rope_(pair, pos) = Tuple(cast<float>(cos(angle)), cast<float>(sin(angle)));
  }
}

std::vector<Func> ScoreTerms::tables() const {
  std::vector<Func> defined;
  for (const Func& f : {bigbirdRandom_, rope_})
    if (f.defined())
      defined.push_back(f);
  for (const Func& f : auxSummaries_->funcs())
    defined.push_back(f);
  return defined;
}

Expr ScoreTerms::load(const ImageParam& p, Expr d, Expr t, Expr h, Expr b) const {
  if (spec_.variant == Variant::Mha)
    return p(d, t, b);
  return spec_.layout == Layout::Bhsd ? p(d, t, h, b) : p(d, h, t, b);
}

Expr ScoreTerms::validKeys(Expr b) const {
  return spec_.masks.has(MaskKind::Padding) ? clamp(lengths_(b), 0, seqK_) : seqK_;
}

Expr ScoreTerms::modified(Expr x, Expr queryRow, Expr key, Expr h, Expr b) const {
  if (modifiers_)
    x = translate(*modifiers_, expressionPoint(queryRow, key, h, b, x), spec_, builtinInputs_);
  if (spec_.scoreMod.tree)
    x = translate(*spec_.scoreMod.tree, expressionPoint(queryRow, key, h, b, x), spec_, aux_);
  return x;
}

ExprPoint ScoreTerms::expressionPoint(Expr queryRow, Expr key, Expr h, Expr b, Expr score) const {
  const Expr rowIn = clamp(queryRow, 0, seqQ_ - 1), keyIn = clamp(key, 0, seqK_ - 1);
  const Expr g = h / static_cast<int>(spec_.groupSize());
  return {b, h, g, rowIn, keyIn, position(rowIn), seqQ_, seqK_, score};
}

Expr ScoreTerms::keep(Expr queryRow, Expr key, Expr h, Expr b, bool sameResidueClass) const {
  const Spec& s = spec_;
  const MaskSet m = s.masks;
  const Expr qpos = position(queryRow);
  const Expr keyIn = min(key, seqK_ - 1), rowIn = min(queryRow, seqQ_ - 1);
  // Linformer's padding acted in the projection: every projected key is kept, unless the batch
  // has no valid key at all.
  if (s.variant == Variant::Linformer)
    return key < keys_ && validKeys(b) > 0;
  // Constraints intersect; sparsity patterns unite (docs/spec.md).
  Expr keep = key < seqK_;
  if (m.has(MaskKind::Causal))
    keep = keep && masks::causal(qpos, key);
  if (m.has(MaskKind::Padding))
    keep = keep && key < lengths_(b);
  if (m.has(MaskKind::Tensor))
    keep =
        keep && mask_(keyIn, rowIn, broadcastIndex(mask_, 2, h), broadcastIndex(mask_, 3, b)) != 0;
  if (s.maskMod.tree)
    keep = keep &&
           translate(*s.maskMod.tree, expressionPoint(queryRow, key, h, b, Expr()), s, aux_);
  if (!m.hasSparsityPattern())
    return keep;
  Expr any = cast<bool>(false);
  const Expr left = static_cast<int>(s.windowLeft), right = static_cast<int>(s.windowRight);
  if (m.has(MaskKind::Window))
    any = any || masks::window(qpos, key, left, right);
  if (m.has(MaskKind::Global))
    any = any || masks::global(qpos, key, Expr(static_cast<int>(s.globalTokens)));
  const Expr stride = static_cast<int>(s.stride), dilation = static_cast<int>(s.dilation);
  if (m.has(MaskKind::Strided))
    any = any || (sameResidueClass ? cast<bool>(true) : masks::strided(qpos, key, stride));
  if (m.has(MaskKind::Dilated))
    any = any || (sameResidueClass ? masks::window(qpos, key, left * dilation, right * dilation)
                                   : masks::dilated(qpos, key, left, right, dilation));
  const Expr block = static_cast<int>(s.block);
  if (m.has(MaskKind::BlockSparse))
    any = any || layout_(keyIn / block, rowIn / block, broadcastIndex(layout_, 2, h)) != 0;
  if (m.has(MaskKind::BigBird))
    any = any || bigbirdDrawn(rowIn / block, keyIn / block, h);
  return keep && any;
}

Expr ScoreTerms::blockLive(const ScoreRegion& region, Expr h, Expr b) const {
  const MaskSet m = spec_.masks;
  if (spec_.variant == Variant::Linformer)
    return validKeys(b) > 0;
  const Expr firstKey = region.firstKey, lastKey = region.lastKey;
  Expr live = cast<bool>(true);
  if (m.has(MaskKind::Causal))
    live = live && firstKey <= position(region.lastRow);
  if (m.has(MaskKind::Padding))
    live = live && firstKey < lengths_(b);
  if (spec_.maskMod.tree) {
    // Halide solves the block loop's predicate for every variable in it, and narrowing the
    // batch or head loops by it (kv_idx < 1 - b) leaves their buffers sized for fewer heads or
    // batches than the loops visit: b and h reach the predicate through a call it cannot
    // invert, so only the row tile and key block are solved for.
    const Expr opaqueB = unsafe_promise_clamped(b, 0, b.type().max());
    const Expr opaqueH = unsafe_promise_clamped(h, 0, h.type().max());
    const Expr lastRow = min(region.lastRow, seqQ_ - 1);
    const Expr g = opaqueH / static_cast<int>(spec_.groupSize());
    const TileRanges tile{region.firstRow, lastRow, firstKey, min(lastKey, seqK_ - 1),
                          position(region.firstRow), position(lastRow), opaqueB, opaqueH, g,
                          seqQ_, seqK_, region.maxRows, region.maxKeys};
    live = live && maskMayKeep(*spec_.maskMod.tree, tile, spec_, aux_, *auxSummaries_);
  }
  if (!m.hasSparsityPattern())
    return live;
  // Sparsity patterns unite, so the region is live when any pattern can reach it; strided is
  // not bounded at this level (ResidueOrder gathers it when it is the only pattern).
  const Expr firstPos = position(region.firstRow), lastPos = position(region.lastRow);
  auto within = [&](int64_t left, int64_t right) { // some key in [pos - left, pos + right]
    return lastKey >= firstPos - static_cast<int>(left) &&
           firstKey <= lastPos + static_cast<int>(right);
  };
  Expr any = cast<bool>(false);
  if (m.has(MaskKind::Window))
    any = any || within(spec_.windowLeft, spec_.windowRight);
  if (m.has(MaskKind::Dilated))
    any = any || within(spec_.windowLeft * spec_.dilation, spec_.windowRight * spec_.dilation);
  if (m.has(MaskKind::Global)) {
    const Expr n = static_cast<int>(spec_.globalTokens);
    any = any || firstPos < n || firstKey < n;
  }
  if (m.has(MaskKind::Strided))
    any = cast<bool>(true);
  if (m.has(MaskKind::BlockSparse))
    any = any || somePatternBlock(region, [&](Expr qb, Expr kb) {
            return layout_(kb, qb, broadcastIndex(layout_, 2, h)) != 0;
          });
  if (m.has(MaskKind::BigBird))
    any = any || somePatternBlock(region, [&](Expr qb, Expr kb) { return bigbirdDrawn(qb, kb, h); });
  return live && any;
}

Expr ScoreTerms::somePatternBlock(const ScoreRegion& region,
                                  const std::function<Expr(Expr, Expr)>& drawn) const {
  // The pattern's blocks the region overlaps: at most ceil(span / block) + 1 along each side,
  // a count known here, so the test unrolls into a fixed expression. Past 64 pairs the region
  // is taken as live (the schedule's tiles are then far larger than the pattern's blocks).
  const int block = static_cast<int>(spec_.block);
  const int rowBlocks = (region.maxRows + block - 1) / block + 1;
  const int keyBlocks = (region.maxKeys + block - 1) / block + 1;
  if (rowBlocks * keyBlocks > 64)
    return cast<bool>(true);
  const Expr firstQb = region.firstRow / block, lastQb = min(region.lastRow, seqQ_ - 1) / block;
  const Expr firstKb = region.firstKey / block, lastKb = min(region.lastKey, seqK_ - 1) / block;
  Expr any = cast<bool>(false);
  for (int a = 0; a < rowBlocks; ++a)
    for (int c = 0; c < keyBlocks; ++c)
      any = any || drawn(min(firstQb + a, lastQb), min(firstKb + c, lastKb));
  return any;
}

Expr ScoreTerms::bigbirdDrawn(Expr qb, Expr kb, Expr h) const {
  const Expr block = static_cast<int>(spec_.block);
  Expr queryBlocks = (seqQ_ + block - 1) / block, keyBlocks = (seqK_ + block - 1) / block;
  Expr drawn = masks::bigbirdStructured(qb, kb, queryBlocks, keyBlocks,
                                        Expr(static_cast<int>(spec_.windowBlocks)),
                                        Expr(static_cast<int>(spec_.globalBlocks)));
  for (int r = 0; r < spec_.randomBlocks; ++r)
    drawn = drawn || bigbirdRandom_(r, qb, h) == kb;
  return drawn;
}

Expr ScoreTerms::dropFactor(Expr queryRow, Expr key, Expr h, Expr b) const {
  // The expression reads no tensor, so the row and key need no clamping into them: left as
  // they are, a vector of keys stays a ramp Halide divides and selects words on cheaply.
  const Expr g = h / static_cast<int>(spec_.groupSize());
  const ExprPoint point{b, h, g, queryRow, key, position(queryRow), seqQ_, seqK_, Expr()};
  return translate(*dropout_, point, spec_, aux_);
}

Expr ScoreTerms::rotated(const std::function<Expr(Expr)>& element, Expr d, Expr pos) const {
  const int dims = static_cast<int>(spec_.ropeDims), pairs = dims / 2;
  const int last = static_cast<int>(spec_.dK) - 1;
  if (spec_.ropeStyle == RopeStyle::Half) {
    // (x_p, x_{p+pairs}) -> (x_p c - x_{p+pairs} s, x_p s + x_{p+pairs} c)
    Expr pair = clamp(select(d < pairs, d, d - pairs), 0, pairs - 1);
    Expr c = rope_(pair, pos)[0], sn = rope_(pair, pos)[1];
    Expr low = element(d) * c - element(min(d + pairs, last)) * sn;
    Expr high = element(max(d - pairs, 0)) * sn + element(d) * c;
    return select(d < pairs, low, d < dims, high, element(d));
  }
  // (x_{2p}, x_{2p+1}) -> (x_{2p} c - x_{2p+1} s, x_{2p} s + x_{2p+1} c)
  Expr pair = clamp(d / 2, 0, pairs - 1);
  Expr c = rope_(pair, pos)[0], sn = rope_(pair, pos)[1];
  Expr even = element(d) * c - element(min(d + 1, last)) * sn;
  Expr odd = element(max(d - 1, 0)) * sn + element(d) * c;
  return select(d >= dims, element(d), d % 2 == 0, even, odd);
}

} // namespace attnc::halide
