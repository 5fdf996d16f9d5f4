#include "Backends/Halide/ScoreTerms.h"

#include "Abi/Arguments.h"
#include "Backends/Halide/IeeeFloat.h"
#include "Expr/ExprQueries.h"
#include "Spec/BuiltinExpressions.h"

#include "Semantics/Positions.h"

#include <algorithm>
#include <cstdint>

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
  const bool cache = name[0] != 'q';
  ImageParam p(cache && s.kvDtype == KvDType::Int8 ? Int(8) : storageType(s.dtype), 4, name);
  if (s.kvCache == KvCache::Paged && cache) {
    // A page of the cache, [pages, page_size, kv_heads, d] (d, g, row, page here) or
    // [pages, kv_heads, page_size, d] (d, row, g, page).
    const bool nhd = s.pageLayout == PageLayout::Nhd;
    p.dim(0).set_stride(Expr()).set_bounds(0, static_cast<int>(dim));
    p.dim(nhd ? 1 : 2).set_bounds(0, static_cast<int>(heads));
    p.dim(nhd ? 2 : 1).set_bounds(0, static_cast<int>(s.pageSize));
    return p;
  }
  const int headDim = s.layout == Layout::Bhsd ? 2 : 1;
  p.dim(0).set_stride(Expr()).set_bounds(0, static_cast<int>(dim));
  p.dim(headDim).set_bounds(0, static_cast<int>(heads));
  return p;
}

// `mask` where the caller guarantees (qpos - kv_idx) % period == 0: each test
// (qpos - kv_idx) % m == 0 (or of kv_idx - qpos) with m dividing the period is true.
expr::Node withinResidueClass(const expr::Node& mask, int period) {
  using expr::Op;
  auto is = [](const expr::Node& n, const char* name) {
    return n.op == Op::Variable && n.name == name;
  };
  auto positionDifference = [&](const expr::Node& n) {
    return n.op == Op::Sub && ((is(n.args[0], "qpos") && is(n.args[1], "kv_idx")) ||
                               (is(n.args[0], "kv_idx") && is(n.args[1], "qpos")));
  };
  if (mask.op == Op::Eq && mask.args[1].op == Op::IntLiteral && mask.args[1].intValue == 0) {
    const expr::Node& residue = mask.args[0];
    if (residue.op == Op::Mod && positionDifference(residue.args[0]) &&
        residue.args[1].op == Op::IntLiteral && residue.args[1].intValue != 0 &&
        period % residue.args[1].intValue == 0)
      return expr::Node{Op::BoolLiteral, expr::Type::Bool, 1, 0, "", {}, mask.column};
  }
  expr::Node rewritten = mask;
  for (expr::Node& a : rewritten.args)
    a = withinResidueClass(a, period);
  return rewritten;
}

// The largest parts of `n` that draw from Philox and pass `fits`, by their drawIdentity.
void drawingParts(const expr::Node& n, const std::function<bool(const expr::Node&)>& fits,
                  std::map<std::string, const expr::Node*>& parts) {
  if (fits(n) && expr::contains(n, [](const expr::Node& m) { return m.op == expr::Op::Philox; })) {
    parts.emplace(drawIdentity(n), &n);
    return;
  }
  for (const expr::Node& a : n.args)
    drawingParts(a, fits, parts);
}

// The smallest block a draw per pair of blocks may have: a task's table then holds at most
// Tk / 16 entries per block of its rows.
constexpr int64_t kMinDrawBlock = 16;

} // namespace

Type storageType(DType dtype) {
  switch (dtype) {
  case DType::F32: return Float(32);
  case DType::F16: return Float(16);
  case DType::BF16: return BFloat(16);
  }
  return Float(32);
}

Expr stored(DType dtype, Expr value) {
  const Expr narrowed = cast(storageType(dtype), value);
  if (dtype != DType::F16)
    return narrowed;
  const Expr quietNaN16 = reinterpret(Float(16), cast<uint16_t>(0x7e00));
  return select(isNaN(value), quietNaN16, narrowed);
}

ScoreTerms::ScoreTerms(const Spec& s, bool tablesPerTask)
    : spec_(s), q_(headParam(s, "q", s.dQ, s.heads)),
      k_(headParam(s, s.kvCache == KvCache::Paged ? "k_pages" : "k", s.dK, s.kvHeads)),
      v_(headParam(s, s.kvCache == KvCache::Paged ? "v_pages" : "v", s.dV, s.kvHeads)),
      lengths_(Int(32), 1, "lengths") {
  // Manifest order (Abi/Arguments.cpp): q, k, v (or k_pages, v_pages), seq_lens, block_table,
  // lengths, mask, block_layout, bias, aux.
  inputs_ = {q_, k_, v_};
  auto declare = [&](ImageParam p) {
    p.dim(0).set_stride(Expr());
    tensors_.emplace(p.name(), p);
    inputs_.push_back(p);
  };
  if (s.kvDtype == KvDType::Int8)
    for (const char* scale : {"k_scale", "v_scale"})
      declare(ImageParam(Float(32), 3, scale));
  if (s.cached())
    declare(ImageParam(Int(32), 1, "seq_lens"));
  if (s.kvCache == KvCache::Paged) {
    blockTable_ = ImageParam(Int(32), 2, "block_table");
    declare(blockTable_);
  }
  if (s.masks.has(MaskKind::Padding)) {
    tensors_.emplace("lengths", lengths_);
    inputs_.push_back(lengths_);
  }
  if (s.masks.has(MaskKind::Tensor))
    declare(ImageParam(UInt(8), 4, "mask"));
  if (s.masks.has(MaskKind::BlockSparse))
    declare(ImageParam(UInt(8), 3, "block_layout"));
  if (s.bias)
    declare(ImageParam(storageType(s.dtype), 4, "bias"));
  for (const AuxTensor& a : s.aux)
    declare(ImageParam(a.elementType == expr::Type::Int ? Int(32) : Float(32),
                       static_cast<int>(a.dims.size()), a.name));
  modifiers_ = modifiersAsExpression(s);
  scoreMod_ = scoreModAsExpression(s);
  mask_ = masksWithMaskMod(s, kBuiltinMasks);
  dropout_ = dropoutAsExpression(s);
  auxSummaries_ = std::make_unique<AuxSummaries>(mask_, tensors_);
  // The parameters (w_q, w1, e, omega, ..., in the spec's dtype; sinks in f32), as the manifest
  // declares them; constant extents are bounds Halide can use, Tk (Linformer's E and F) is
  // known at run time.
  for (const Argument& a : kernelArguments(s)) {
    if (a.role != ArgumentRole::Param)
      continue;
    const Type element = a.dtypes.front() == "f32" ? Float(32) : storageType(s.dtype);
    ImageParam p(element, static_cast<int>(a.shape.size()), a.name);
    for (size_t k = 0; k < a.shape.size(); ++k)
      if (!a.shape[k].symbol)
        p.dim(static_cast<int>(a.shape.size() - 1 - k)).set_bounds(0, static_cast<int>(a.shape[k].value));
    params_.emplace(a.name, p);
    inputs_.push_back(p);
  }
  const int seqDim = s.layout == Layout::Bhsd || s.variant == Variant::Mha ? 1 : 2;
  seqQ_ = q_.dim(seqDim).extent();
  // A paged cache's Tk is its block table's pages per sequence, whole.
  seqK_ = s.kvCache == KvCache::Paged ? blockTable_.dim(0).extent() * static_cast<int>(s.pageSize)
                                      : k_.dim(seqDim).extent();
  keys_ = s.variant == Variant::Linformer ? Expr(static_cast<int>(s.projLen)) : seqK_;
  offset_ = s.causalAlign == CausalAlign::BottomRight ? seqK_ - seqQ_ : Expr(0);

  tableDraws(tablesPerTask);
  Var pair("pair"), pos("pos");
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

void ScoreTerms::tableDraws(bool perTask) {
  if (!mask_)
    return;
  // Draws that read no key: one value per query row, head and batch.
  std::map<std::string, const expr::Node*> draws;
  drawingParts(*mask_, [](const expr::Node& n) { return !expr::reads(n, "kv_idx"); }, draws);
  const Expr heads = static_cast<int>(spec_.heads);
  const Expr batches = q_.dim(q_.dimensions() - 1).extent();
  const Expr seqQ = seqQ_, seqK = seqK_;
  Var rows("rows"), keys("keys"), h("h"), b("b");
  const Expr g = h / static_cast<int>(spec_.groupSize());
  for (const auto& [text, draw] : draws) {
    // One entry per block of rows when the part reads rows only as blocks (BigBird's q_idx //
    // block), else one per row.
    const int block = static_cast<int>(std::max<int64_t>(expr::blockOf(*draw, "q_idx"), 1));
    const Expr row = rows * block;
    Func table("row_draw_" + std::to_string(drawTables_.size()));
    table(rows, h, b) = translate(
        *draw, {b, h, g, row, Expr(0), position(row), seqQ_, seqK_, Expr()}, spec_, tensors_);
    drawTables_.push_back(table);
    rowDraws_.emplace(text, [=](Expr r, Expr, Expr hr, Expr br) {
      return table(clamp(r, 0, seqQ - 1) / block, clamp(hr, 0, heads - 1),
                   clamp(br, 0, batches - 1));
    });
  }
  if (!perTask)
    return;
  // Draws that read keys, and rows if at all, only as blocks of kMinDrawBlock or more: one
  // value per pair of blocks.
  draws.clear();
  drawingParts(
      *mask_,
      [](const expr::Node& n) {
        const int64_t rows = expr::blockOf(n, "q_idx"), keys = expr::blockOf(n, "kv_idx");
        return keys >= kMinDrawBlock && (rows == 0 || rows >= kMinDrawBlock);
      },
      draws);
  for (const auto& [text, draw] : draws) {
    const int rowBlock = static_cast<int>(expr::blockOf(*draw, "q_idx"));
    const int keyBlock = static_cast<int>(expr::blockOf(*draw, "kv_idx"));
    const Expr row = rows * std::max(rowBlock, 1), key = keys * keyBlock;
    Func table("pair_draw_" + std::to_string(perTaskTables_.size()));
    table(keys, rows, h, b) = translate(
        *draw, {b, h, g, row, key, position(row), seqQ_, seqK_, Expr()}, spec_, tensors_);
    perTaskTables_.push_back(table);
    pairDraws_.emplace(text, PairDraw{table, rowBlock, keyBlock});
  }
}

std::vector<Func> ScoreTerms::tables() const {
  std::vector<Func> defined;
  if (rope_.defined())
    defined.push_back(rope_);
  defined.insert(defined.end(), drawTables_.begin(), drawTables_.end());
  for (const Func& f : auxSummaries_->funcs())
    defined.push_back(f);
  return defined;
}

Expr ScoreTerms::load(const ImageParam& p, Expr d, Expr t, Expr h, Expr b) const {
  // The batch entry and head clamped into the tensor, as rows are: Halide bounds a load under a
  // select by the select's condition, and `where(b > 5, score, 0.5)` at B 2 asked for q's batch
  // entries [6, 1], which its input check refused ("accessed at 6").
  b = clamp(b, 0, p.dim(p.dimensions() - 1).extent() - 1);
  if (spec_.variant == Variant::Mha)
    return p(d, t, b);
  const bool cache = p.name() != q_.name();
  // The element's coordinates after d, innermost first.
  Expr at[3];
  if (spec_.kvCache == KvCache::Paged && cache) {
    // Position t of sequence b: row t % P of page block_table[b, t / P]. The runtime checked
    // the entries of each sequence's keys; the others (a partial block's tail) are clamped
    // into the cache, and their scores masked.
    const Expr pageRows = static_cast<int>(spec_.pageSize);
    const Expr entry = blockTable_(clamp(t / pageRows, 0, blockTable_.dim(0).extent() - 1),
                                   clamp(b, 0, blockTable_.dim(1).extent() - 1));
    const Expr page = clamp(entry, 0, p.dim(3).extent() - 1), row = t % pageRows;
    if (spec_.pageLayout == PageLayout::Nhd)
      at[0] = h, at[1] = row, at[2] = page;
    else
      at[0] = row, at[1] = h, at[2] = page;
  } else if (spec_.layout == Layout::Bhsd) {
    at[0] = t, at[1] = clamp(h, 0, p.dim(2).extent() - 1), at[2] = b;
  } else {
    at[0] = clamp(h, 0, p.dim(1).extent() - 1), at[1] = t, at[2] = b;
  }
  const Expr value = p(d, at[0], at[1], at[2]);
  if (!cache || spec_.kvDtype != KvDType::Int8)
    return value;
  // An int8 cache's element times its row's scale (k_scale or v_scale: the rows without d).
  const ImageParam& scale = tensors_.at(p.name() == k_.name() ? "k_scale" : "v_scale");
  return cast<float>(value) * scale(at[0], at[1], at[2]);
}

Expr ScoreTerms::queryPosition(Expr queryRow, Expr b) const {
  return spec_.cached() ? queryRow + validKeys(b) - seqQ_ : position(queryRow);
}

Expr ScoreTerms::validKeys(Expr b) const {
  if (spec_.cached())
    return clamp(tensors_.at("seq_lens")(b), 0, seqK_);
  return spec_.masks.has(MaskKind::Padding) ? clamp(lengths_(b), 0, seqK_) : seqK_;
}

// A score is an f32 whatever the modifier's type: an int score_mod (kv_idx - qpos) converts.
Expr ScoreTerms::modified(Expr x, Expr queryRow, Expr key, Expr h, Expr b) const {
  if (modifiers_)
    x = translate(*modifiers_, expressionPoint(queryRow, key, h, b, x), spec_, tensors_);
  if (scoreMod_)
    x = cast<float>(
        translate(*scoreMod_, expressionPoint(queryRow, key, h, b, x), spec_, tensors_));
  return x;
}

ExprPoint ScoreTerms::expressionPoint(Expr queryRow, Expr key, Expr h, Expr b, Expr score) const {
  // Left unclamped, a vector of keys stays a ramp, which Halide compares and divides cheaply.
  const Expr g = h / static_cast<int>(spec_.groupSize());
  return {b, h, g, queryRow, key, position(queryRow), seqQ_, seqK_, score};
}

TabledDraws ScoreTerms::drawsInTask(Expr h, Expr b) const {
  // The draws per pair of blocks are read at the task's own head and batch, so that its table
  // holds only theirs (through a call, which the block loop's solver does not invert either).
  TabledDraws draws = rowDraws_;
  for (const auto& [text, pair] : pairDraws_) {
    const Expr seqQ = seqQ_, seqK = seqK_;
    draws.emplace(text, [pair, seqQ, seqK, h, b](Expr q, Expr kv, Expr, Expr) {
      const Expr row = pair.rowBlock ? clamp(q, 0, seqQ - 1) / pair.rowBlock : Expr(0);
      return pair.table(clamp(kv, 0, seqK - 1) / pair.keyBlock, row, h, b);
    });
  }
  return draws;
}

Expr ScoreTerms::keep(Expr queryRow, Expr key, Expr h, Expr b, int residuePeriod) const {
  // Linformer's padding acted in the projection: every projected key is kept, unless the batch
  // has no valid key at all.
  if (spec_.variant == Variant::Linformer)
    return key < keys_ && validKeys(b) > 0;
  if (!mask_)
    return key < seqK_;
  const expr::Node mask = residuePeriod ? withinResidueClass(*mask_, residuePeriod) : *mask_;
  return key < seqK_ && translate(mask, expressionPoint(queryRow, key, h, b, Expr()), spec_,
                                  tensors_, rowDraws_);
}

Expr ScoreTerms::blockLive(const ScoreRegion& region, Expr h, Expr b) const {
  if (spec_.variant == Variant::Linformer)
    return validKeys(b) > 0;
  if (!mask_)
    return cast<bool>(true);
  return classified(region, h, b).mayKeep;
}

Expr ScoreTerms::blockFull(const ScoreRegion& region, Expr h, Expr b) const {
  if (spec_.variant == Variant::Linformer || !mask_)
    return Expr();
  // Simplified to find the masks whose bounds never rule a drop out (a tensor mask, a draw per
  // element): those blocks all take the elementwise mask, with no test.
  const Expr full =
      Internal::simplify(region.lastKey < seqK_ && !classified(region, h, b).mayDrop);
  return Internal::is_const_zero(full) ? Expr() : full;
}

namespace {

// The operands of the top-level &&s of `mask`, left to right.
void collectConjuncts(const expr::Node& mask, std::vector<expr::Node>& conjuncts) {
  if (mask.op != expr::Op::And) {
    conjuncts.push_back(mask);
    return;
  }
  collectConjuncts(mask.args[0], conjuncts);
  collectConjuncts(mask.args[1], conjuncts);
}

expr::Node conjunction(const std::vector<expr::Node>& conjuncts) {
  expr::Node all = conjuncts.front();
  for (size_t i = 1; i < conjuncts.size(); ++i)
    all = expr::Node{expr::Op::And, expr::Type::Bool, 0, 0, "", {all, conjuncts[i]}, 0};
  return all;
}

} // namespace

void ScoreTerms::tableTileClasses(int queryTile, int keyBlock) {
  if (!mask_)
    return;
  std::vector<expr::Node> conjuncts, tabled, inlined;
  collectConjuncts(*mask_, conjuncts);
  for (const expr::Node& c : conjuncts)
    (expr::contains(c, [](const expr::Node& n) { return n.op == expr::Op::Aux; }) ? tabled
                                                                                  : inlined)
        .push_back(c);
  if (tabled.empty())
    return;
  Var kb("kb"), tile("tile"), h("h"), b("b");
  const ScoreRegion region{kb * keyBlock, kb * keyBlock + keyBlock - 1, tile * queryTile,
                           min(tile * queryTile + queryTile, seqQ_) - 1, queryTile, keyBlock};
  const TileClass tabledClass = classifiedAs(conjunction(tabled), region, h, b);
  const Expr keep = Internal::simplify(tabledClass.mayKeep);
  const Expr drop = Internal::simplify(tabledClass.mayDrop);
  tabledKeep_ = !Internal::is_const_one(keep);
  tabledDrop_ = !Internal::is_const_one(drop);
  if (!tabledKeep_ && !tabledDrop_) // bounds that decide nothing (a tensor mask): no table
    return;
  tileClasses_ = Func("tile_classes");
  tileClasses_(kb, tile, h, b) = select(keep, cast<uint8_t>(1), cast<uint8_t>(0)) |
                                 select(drop, cast<uint8_t>(2), cast<uint8_t>(0));
  perTaskTables_.push_back(tileClasses_);
  if (!inlined.empty())
    inlineMask_ = conjunction(inlined);
  classRows_ = queryTile;
  classKeys_ = keyBlock;
}

TileClass ScoreTerms::classified(const ScoreRegion& region, Expr h, Expr b) const {
  if (!tileClasses_.defined())
    return classifiedAs(*mask_, region, h, b);
  // mask = inline && tabled: it may keep where both may, and may drop where either may.
  TileClass c = inlineMask_ ? classifiedAs(*inlineMask_, region, h, b)
                            : TileClass{cast<bool>(true), cast<bool>(false)};
  const Expr entry =
      tileClasses_(region.firstKey / classKeys_, region.firstRow / classRows_, h, b);
  if (tabledKeep_)
    c.mayKeep = c.mayKeep && (entry & cast<uint8_t>(1)) != 0;
  c.mayDrop = tabledDrop_ ? c.mayDrop || (entry & cast<uint8_t>(2)) != 0 : cast<bool>(true);
  return c;
}

TileClass ScoreTerms::classifiedAs(const expr::Node& mask, const ScoreRegion& region, Expr h,
                                   Expr b) const {
  // Halide solves the block loop's predicate for every variable in it, and narrowing the
  // batch or head loops by it (kv_idx < 1 - b) leaves their buffers sized for fewer heads or
  // batches than the loops visit: b and h reach the predicate through a call it cannot
  // invert, so only the row tile and key block are solved for.
  const Expr opaqueB = unsafe_promise_clamped(b, 0, b.type().max());
  const Expr opaqueH = unsafe_promise_clamped(h, 0, h.type().max());
  const Expr lastRow = min(region.lastRow, seqQ_ - 1);
  const Expr g = opaqueH / static_cast<int>(spec_.groupSize());
  const TileRanges tile{region.firstRow, lastRow, region.firstKey, min(region.lastKey, seqK_ - 1),
                        position(region.firstRow), position(lastRow), opaqueB, opaqueH, g,
                        seqQ_, seqK_, region.maxRows, region.maxKeys};
  return classifyMask(mask, tile, spec_, tensors_, *auxSummaries_, drawsInTask(h, b));
}

Expr ScoreTerms::dropFactor(Expr queryRow, Expr key, Expr h, Expr b) const {
  return translate(*dropout_, expressionPoint(queryRow, key, h, b, Expr()), spec_, tensors_);
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
