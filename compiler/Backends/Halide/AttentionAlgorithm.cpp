#include "Backends/Halide/AttentionAlgorithm.h"

#include "Backends/Halide/IeeeFloat.h"
#include "Semantics/OnlineSoftmax.h"
#include "Support/Errors.h"

#include <limits>
#include <string>

namespace attnc::halide {
namespace {

using namespace Halide;

// tanh(x) = 1 - 2 / (e^(2x) + 1), from the vectorised exp (Halide's tanh is a scalar libm call
// per lane); e^(2x) = inf for large x gives exactly 1.
Expr fastTanh(Expr x) {
  return 1.0f - 2.0f / (ieeeExp(2.0f * x) + 1.0f);
}

// NaN of either sign, or +inf.
Expr isNaNOrPositiveInf(Expr x) {
  return isNaN(x) || isPositiveInf(x);
}

} // namespace

AttentionAlgorithm buildAttention(const Spec& s, int queryTile, int keyBlock, bool gatherSparse) {
  AttentionAlgorithm a;
  a.terms = std::make_shared<ScoreTerms>(s, gatherSparse);
  const ScoreTerms& terms = *a.terms;
  a.operands = defineOperands(s, terms);
  const VariantOperands& ops = a.operands;
  Var d = a.d, i = a.i, j = a.j, row = a.row, tile = a.tile, jj = a.jj, kb = a.kb, h = a.h, b = a.b;
  const Expr seqQ = terms.seqQ(), keys = terms.keys();
  if (gatherSparse)
    a.order =
        ResidueOrder::forSpec(s, seqQ, terms.seqK(), terms.position(0), queryTile, keyBlock);
  if (!a.order) // regions aligned to the tiles: the aux reads' classes in a table
    a.terms->tableTileClasses(queryTile, keyBlock);
  // Rows and keys in streaming order: slots, which are positions unless a ResidueOrder sorts
  // them by class.
  const Expr rowSlots = a.order ? a.order->rowSlots() : seqQ;
  const Expr keySlots = a.order ? a.order->keySlots() : keys;
  auto slotOfRow = [&](Expr i) { return a.order ? a.order->slotOfRow(i) : i; };
  // Additive's scale is in its score weights; the others scale the query once per row.
  const float scale = ops.additive ? 1.0f : static_cast<float>(s.scale);
  // The score of one query element and one key element, summed over the score dim.
  auto combine = [&](Expr queryElement, Expr keyElement, Expr e) {
    if (ops.additive)
      return ops.scoreWeight(e, h) * fastTanh(queryElement + keyElement);
    return queryElement * keyElement;
  };

  // The positions of (row, tile) and (jj, kb), which may pass Tq and Tk (the last tile and
  // block, phantom slots). In residue order they are small tables, made once per tile and per
  // block, so the score loops do not divide by the class length.
  // Table reads are clamped so bounds inference sees the range the tables hold: rows past Tq
  // are never read, and keys past Tk stay past it (keySlots >= Tk), so they are masked.
  Expr queryRow = tile * queryTile + row;
  if (a.order) {
    a.rowPosition = Func("row_position");
    a.rowPosition(row, tile) = a.order->row(queryRow);
    queryRow = clamp(a.rowPosition(row, tile), 0, rowSlots);
    a.keyPosition = Func("key_position");
    a.keyPosition(jj, kb) = a.order->key(kb * keyBlock + jj);
  }
  // The key at `inBlock` of block kb.
  auto keyAt = [&](Expr inBlock) {
    return a.order ? clamp(a.keyPosition(inBlock, kb), 0, keySlots) : kb * keyBlock + inBlock;
  };
  const Expr key = keyAt(jj);

  a.queryRows = Func("query_rows");
  a.queryRows(d, row, tile, h, b) = ops.queryIn(d, queryRow, h, b) * scale;
  a.query = Func("query");
  a.query(row, d, tile, h, b) = a.queryRows(d, row, tile, h, b);

  a.dot = RDom(0, ops.scoreDim, "dot");
  a.score = Func("score");
  a.score(row, jj, kb, tile, h, b) = 0.0f;
  // The block's keys and values as f32 (RoPE'd keys when asked): converted once per block, not
  // once per use, when the schedule computes them at the block; in residue order, gathered.
  a.keyBlock = Func("key_block");
  a.keyBlock(d, jj, kb, h, b) = ops.keyIn(d, min(key, keys - 1), h, b);
  a.valueBlock = Func("value_block");
  a.valueBlock(d, jj, kb, h, b) = ops.valueIn(d, min(key, keys - 1), h, b);
  a.score(row, jj, kb, tile, h, b) += combine(a.query(row, a.dot, tile, h, b),
                                              a.keyBlock(a.dot, jj, kb, h, b), a.dot);

  // Scores as the online softmax uses them: kLowest() where masked (and where the modifiers
  // gave -inf: an additive -inf bias masks), kPoisoned() for a score that is NaN or +inf, or
  // whose raw product is NaN (before softcap's tanh, which would hide it). Halide compiles
  // floats as if neither NaN nor Inf existed, so they are found in the bits, and replaced by a
  // finite sentinel that keeps every later step finite; the row's running max then is the
  // sentinel, and its outputs NaN (docs/spec.md, "Special values").
  a.masked = Func("masked");
  Expr raw = a.score(row, jj, kb, tile, h, b);
  Expr modified = terms.modified(raw, queryRow, key, h, b);
  Expr poisoned = isNaNOrPositiveInf(modified);
  if (s.softcap > 0) // a +inf product is cap there, as in the reference; a NaN one poisons
    poisoned = poisoned || isNaN(raw);
  const Expr value = select(poisoned, kPoisoned(), max(modified, kLowest()));
  const int period = a.order ? a.order->period() : 0;
  // A block the tile classifier proves wholly kept skips the elementwise mask: the scores are
  // stored as they are, and the other blocks mask theirs in a pass of their own over the block's
  // keys, whose predicate is the block's test. (In residue order a block is a tile of slots,
  // which the classifier does not bound.)
  const Expr full =
      a.order ? Expr()
              : terms.blockFull({kb * keyBlock, kb * keyBlock + keyBlock - 1, tile * queryTile,
                                 min(tile * queryTile + queryTile, rowSlots) - 1, queryTile,
                                 keyBlock},
                                h, b);
  if (!full.defined()) {
    a.masked(row, jj, kb, tile, h, b) =
        select(terms.keep(queryRow, key, h, b, period), value, kLowest());
  } else {
    a.masked(row, jj, kb, tile, h, b) = value;
    a.maskedKeys = RDom(0, keyBlock, "masked_keys");
    a.maskedKeys.where(!full);
    const RVar k = a.maskedKeys.x;
    a.masked(row, k, kb, tile, h, b) =
        select(terms.keep(queryRow, keyAt(k), h, b, period), a.masked(row, k, kb, tile, h, b),
               kLowest());
  }

  a.inKey = RDom(0, keyBlock, "in_key");
  a.blockMax = Func("block_max");
  a.blockMax(row, kb, tile, h, b) = kLowest();
  a.blockMax(row, kb, tile, h, b) =
      max(a.blockMax(row, kb, tile, h, b), a.masked(row, a.inKey, kb, tile, h, b));

  // p = exp(s - m - c): scaled by e^-c so the accumulators cannot overflow (OnlineSoftmax.h).
  a.prob = Func("prob");
  Expr sij = a.masked(row, jj, kb, tile, h, b);
  const Expr shift = static_cast<float>(softmax::kProbabilityShift);
  a.prob(row, jj, kb, tile, h, b) =
      select(sij > kLowest(), exp(sij - (a.blockMax(row, kb, tile, h, b) + shift)), 0.0f);

  a.blockSum = Func("block_sum");
  a.blockSum(row, kb, tile, h, b) = 0.0f;
  a.blockSum(row, kb, tile, h, b) += a.prob(row, a.inKey, kb, tile, h, b);

  // Dropout acts on the weights that multiply V, after the row sums: o = sum_j drop_ij p_ij v_j.
  a.blockAcc = Func("block_acc");
  a.blockAcc(d, row, kb, tile, h, b) = 0.0f;
  Expr valueKey = keyAt(a.inKey);
  Expr p = a.prob(row, a.inKey, kb, tile, h, b);
  if (s.dropout > 0)
    p *= terms.dropFactor(queryRow, valueKey, h, b);
  a.blockAcc(d, row, kb, tile, h, b) += p * a.valueBlock(d, a.inKey, kb, h, b);

  // Blocks the tile can use at all, from the mask's form: Halide trims the block loop to them.
  a.blocks = RDom(0, (keySlots + keyBlock - 1) / keyBlock, "blocks");
  const ScoreRegion region{a.blocks.x * keyBlock, a.blocks.x * keyBlock + keyBlock - 1,
                           tile * queryTile, min(tile * queryTile + queryTile, rowSlots) - 1,
                           queryTile, keyBlock};
  auto positionsLive = [&](const ScoreRegion& r) { return terms.blockLive(r, h, b); };
  a.blocks.where(a.order ? a.order->blockLive(region, positionsLive) : positionsLive(region));

  // The streaming merge: state = (M, L, A), one A per head-dim element (M and L repeat along d
  // so the three share one loop nest; their exp is per row per block, a small cost).
  a.state = Func("state");
  if (s.sinks) {
    // The sink enters the state before any key, as a logit whose value is 0: M = sink,
    // L = e^(sink - M - c) = e^-c, A = 0 (a NaN or +inf sink poisons the row, as a score would).
    Expr sink = terms.param("sinks")(h);
    a.state(d, row, tile, h, b) =
        Tuple(select(isNaNOrPositiveInf(sink), kPoisoned(), max(sink, kLowest())),
              select(sink > kLowest(), exp(-shift), 0.0f), 0.0f);
  } else {
    a.state(d, row, tile, h, b) = Tuple(kLowest(), 0.0f, 0.0f);
  }
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

  // A row's results in slot order: o = A / L for d < d_v (a row with no key left has L = 0 and
  // gives o = 0), and, when lse or the weights need them, the row's state (M, L) at d = d_v and
  // d_v + 1, from which rowLse and rowNormaliser finish the row. One function, so a schedule can
  // finish each tile's rows in the task that merged them and keep only d_v + 2 values per row,
  // instead of the state's 3 d_v, for the readers that come after (gathered rows, lse, the
  // weights pass, the heads of mha).
  const int dv = static_cast<int>(s.dV);
  const bool withState = s.lse || s.weights;
  {
    FuncRef merged = a.state(min(d, dv - 1), row, tile, h, b);
    Expr value =
        select(merged[0] >= kPoisoned(), quietNaN(), merged[1] > 0, merged[2] / merged[1], 0.0f);
    if (withState) {
      FuncRef first = a.state(0, row, tile, h, b);
      value = select(d < dv, value, d == dv, first[0], first[1]);
    }
    a.finished = Func("finished");
    a.finished(d, row, tile, h, b) = value;
  }
  auto normalised = [&](Expr e, Expr queryRow, Expr head) {
    Expr slot = slotOfRow(queryRow);
    return a.finished(e, slot % queryTile, slot / queryTile, head, b);
  };
  const Expr slotOfI = slotOfRow(i), rowOf = slotOfI % queryTile, tileOf = slotOfI / queryTile;
  a.o = Func("o");
  if (s.variant == Variant::Mha) {
    // O = Concat(head_1..head_H) W_O: the heads side by side, heads(h d_v + d, i, b), times
    // W_O [H d_v, d_model].
    const int dModel = static_cast<int>(s.dModel);
    Var r("r");
    a.heads = Func("heads");
    a.heads(r, i, b) = normalised(r % dv, min(i, seqQ - 1), r / dv);
    const ImageParam& wo = terms.param("w_o");
    a.outputProjection = makeProjection(
        "output_projected", static_cast<int>(s.heads) * dv,
        [&](Expr c, Expr t, Expr, Expr batch, Expr x) {
          return a.heads(x, min(t, seqQ - 1), batch) * cast<float>(wo(min(c, dModel - 1), x));
        });
    a.o(d, i, b) = stored(s.dtype, a.outputProjection.acc(d, i, 0, b));
    a.o.output_buffer().dim(0).set_stride(Expr()).dim(0).set_bounds(0, dModel);
  } else {
    Expr out = normalised(d, i, h);
    if (s.layout == Layout::Bhsd)
      a.o(d, i, h, b) = stored(s.dtype, out);
    else
      a.o(d, h, i, b) = stored(s.dtype, out);
    a.o.output_buffer().dim(0).set_stride(Expr()).dim(0).set_bounds(0, static_cast<int>(s.dV));
  }
  a.outputs = {a.o};

  // The row's state (M, L) as the weights and lse read it.
  const Expr rowMax = a.finished(dv, rowOf, tileOf, h, b);
  const Expr rowSum = a.finished(dv + 1, rowOf, tileOf, h, b);
  const Expr poisonedRow = rowMax >= kPoisoned();
  if (s.lse) {
    // lse = M + c + log L (c as in prob), -inf for a row with no key left (L = 0).
    a.rowLse = Func("row_lse");
    a.rowLse(i, h, b) = select(poisonedRow, quietNaN(), rowSum > 0, rowMax + shift + log(rowSum),
                               Expr(-std::numeric_limits<float>::infinity()));
    a.lse = Func("lse");
    a.lse(i, h, b) = a.rowLse(i, h, b);
    a.lse.output_buffer().dim(0).set_stride(Expr());
    a.outputs.push_back(a.lse);
  }

  if (s.weights) {
    // Exact normalised weights: the scores again, tile by tile, over the row's final state.
    a.weightQuery = Func("weight_query");
    a.weightQuery(d, i, h, b) = ops.queryIn(d, i, h, b) * scale;
    a.weightScore = Func("weight_score");
    a.weightScore(j, i, h, b) = 0.0f;
    a.weightScore(j, i, h, b) +=
        combine(a.weightQuery(a.dot, i, h, b), ops.keyIn(a.dot, min(j, keys - 1), h, b), a.dot);
    Expr x = terms.modified(a.weightScore(j, i, h, b), i, j, h, b);
    // p = e^(x - M - c) / L = e^(x - M) / (L e^c), as prob forms them (docs/spec.md,
    // "Softmax"). Not e^(x - lse): where |M| dwarfs log L (a score_mod's shift of -1e20, a -1e30
    // mask value), M + c + log L rounds to M + c and the weights no longer sum to one. Nor
    // e^(x - M - c): Halide folds c into a row's M (a broadcast along j), where it rounds away
    // too. Per row: (M, 1 / (L e^c)), whose L e^c lies in [1, Tk + 1], or 0 for a row with no
    // key left, whose kept scores are -inf (ieeeExp gives 0).
    a.rowNormaliser = Func("row_normaliser");
    a.rowNormaliser(i, h, b) =
        Tuple(rowMax, select(rowSum > 0, 1.0f / (rowSum * exp(shift)), 0.0f));
    FuncRef normaliser = a.rowNormaliser(i, h, b);
    a.weights = Func("weights");
    // A row that met a NaN or +inf score (M is the sentinel) has NaN weights on its kept keys.
    a.weights(j, i, h, b) = select(!terms.keep(i, j, h, b), 0.0f, normaliser[0] >= kPoisoned(),
                                   quietNaN(), ieeeExp(x - normaliser[0]) * normaliser[1]);
    a.weights.output_buffer().dim(0).set_stride(Expr());
    a.outputs.push_back(a.weights);
  }
  // What the schedule places besides the stages.
  a.q = terms.q();
  a.k = terms.k();
  a.v = terms.v();
  a.tables = terms.tables();
  a.perTaskTables = terms.perTaskTables();
  a.tables.insert(a.tables.end(), ops.tables.begin(), ops.tables.end());
  a.perCall = ops.perCall;
  a.perQueryTile = ops.perQueryTile;
  a.rotatedKeys = ops.rotatedKeys;
  a.gathered = a.order.has_value();
  return a;
}

} // namespace attnc::halide
