//===- LowerUpdate.cpp - online_update of one tile to vector code -------------===//
//
// One update folds a block of nj <= max_keys keys into the state of a query tile of `rows`
// rows. Query rows live in vector lanes (rows = R vectors of W lanes), so that:
//
//   1. S[j, :] = sum_c packedQ[c, :] * K[j, c]   keyUnroll keys x R vectors of FMAs per c
//   2. S[j, :] = mask(modifiers(S[j, :]))         elementwise, -inf where masked (a mask_mod
//                                                 reading aux tensors is not evaluated when
//                                                 the block keeps all)
//      m' = max(m, max_j S[j, :])                  a vertical max: no shuffles
//   3. P[j, :] = exp(S[j, :] - m' - c), l' = exp(m - m') l + sum_j P[j, :]
//                                                 (c: Semantics/OnlineSoftmax.h)
//   4. acc[c, :] = exp(m - m') acc[c, :] + sum_j D[j, :] P[j, :] V[j, c]
//                                                 (D: dropout's factor, 1 without)
//                                                 valueSplit columns x R vectors per j
//
// S is a stack buffer of max_keys x rows floats, reused by every key block of the task.
//
// On AMX tiles (VectorOptions::amx, an update takesPairedProducts allows) steps 1 and 4 are tile
// products in bf16 with f32 accumulation, FlashAttention's precision (Semantics/PairedProducts.h):
// S^T = K Q^T, 16 keys by 16 rows a tile, into S as step 1 leaves it; P rounded to bf16 and O^T +=
// V^T P^T, 16 output columns by 16 rows a tile, loaded from and stored to acc after acc *= alpha. K
// and V^T come from a phase that lays them out (PairedOperands.h), Q^T and P^T as pairs of rows,
// the tiles' B operands, from the task's stack. Every block's products cover all its max_keys keys
// (K is zero past Tk, P zero outside the keys attended), so the tile loops are static: MLIR 19
// cannot carry a tile through a loop (its phi has the wrong LLVM type). A chunk of 32 keys not
// all attended reads V^T's zero chunk instead (a value outside the keys attended may be
// anything, and 0 x inf is NaN), its attended keys added after the tiles as dot products.
//
// As AVX512-BF16 dot products (VectorOptions::dot) steps 1 and 4 keep the vector lowering's
// register tiles, a product taking two head dims or two keys: S[j, :] += vdpbf16ps(Q^T's pair
// of rows c, K[j, c..c+1] broadcast), acc[c, :] += vdpbf16ps(P^T's pair of rows j, V^T[c,
// j..j+1] broadcast), from the same operands as the tiles, over the keys attended only.
//
// Both paired products take Q^T unscaled (the packed query divided by the scale: q, a bf16
// input, is exact in bf16 where q times the scale is not) and step 2 multiplies S by the scale
// in f32, as FlashAttention does.
//
// Each way of multiplying is one UpdateProducts (WidenedProducts, DotProducts, AmxProducts),
// chosen once per kernel; the steps call it and never ask which it is.
//
//===---------------------------------------------------------------------------===//
#include "attn/IR/AttnOps.h"
#include "attn/Kit/Builders.h"
#include "attn/Kit/Elements.h"
#include "attn/Kit/OnlineState.h"
#include "attn/Kit/Products.h"
#include "attn/Transforms/AdditiveKeys.h"
#include "attn/Transforms/ContiguousRows.h"
#include "attn/Transforms/ExpressionBounds.h"
#include "attn/Transforms/LowerStateOps.h"
#include "attn/Transforms/PairedOperands.h"
#include "attn/Transforms/ScorePatch.h"
#include "attn/Transforms/ScoreTerms.h"
#include "attn/Transforms/Transforms.h"
#include "attn/Transforms/UpdateLowering.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <tuple>

using namespace mlir;

namespace attnc::attn {
namespace prefill {
namespace {

// Whether a region only compares sums of its arguments and constants (causal, windows): a few
// integer ops per score vector, which cost less than a second copy of the mask step for the
// blocks it keeps whole (causal kernels ran 1.05-1.08x as fast with one copy). A region that
// reads aux tensors, divides, multiplies or draws gets both copies (a block table ran 1.11x as
// fast with them; BigBird's Philox draws 0.82-0.90x the previous build's speed with one copy,
// 1.15-1.17x with both; docs/benchmarks.md).
bool comparesSums(Region& region) {
  return llvm::all_of(region.front().without_terminator(), [](Operation& op) {
    return isa<arith::ConstantOp, arith::AddIOp, arith::SubIOp, arith::CmpIOp, arith::AndIOp,
               arith::OrIOp, arith::XOrIOp, arith::SelectOp>(op);
  });
}

} // namespace

UpdateLowering::UpdateLowering(ImplicitLocOpBuilder& b, OnlineUpdateOp op,
                               const VectorOptions& options, const PairedOperands* paired,
                               Value additiveKeys)
    : b(b), op(op), options(options), paired(paired), additiveKeys(additiveKeys),
      products(op.getScoreWeights() ? std::unique_ptr<UpdateProducts>(new AdditiveProducts(*this))
               : !paired            ? std::unique_ptr<UpdateProducts>(new WidenedProducts(*this))
               : options.amx        ? std::unique_ptr<UpdateProducts>(new AmxProducts(*this))
                                    : std::unique_ptr<UpdateProducts>(new DotProducts(*this))),
      scale(op.getScale().convertToDouble()), lanes(options.vectorWidth),
      rows(op.getAcc().getType().getDimSize(3)), vectors(rows / lanes),
      vector(VectorType::get({lanes}, b.getF32Type())),
      vectorI32(VectorType::get({lanes}, b.getI32Type())) {}

UpdateLowering::~UpdateLowering() = default;

void UpdateLowering::emitScoresInGroups(int64_t steps, ScoreStep step, Value start) {
  Value unroll = indexConstant(b, options.keyUnroll);
  Value span = b.create<arith::SubIOp>(keyCount, keyBegin);
  Value whole = b.create<arith::SubIOp>(keyCount, b.create<arith::RemUIOp>(span, unroll));
  emitScores(keyBegin, whole, options.keyUnroll, steps, step, start);
  emitScores(whole, keyCount, 1, steps, step, start);
}

// S[j, :] for keys j in [begin, end), `unroll` keys per step (end - begin divisible by it).
void UpdateLowering::emitScores(Value begin, Value end, int64_t unroll, int64_t steps,
                                ScoreStep step, Value start) {
  b.create<scf::ForOp>(
      begin, end, indexConstant(b, unroll), std::nullopt,
      [&](OpBuilder& nested, Location loc, Value j, ValueRange) {
        ImplicitLocOpBuilder ib(loc, nested);
        Value first = start ? ib.create<vector::BroadcastOp>(vector, start).getResult()
                            : f32Splat(ib, lanes, 0);
        SmallVector<Value> init(unroll * vectors, first);
        SmallVector<Value> keys;
        for (int64_t u = 0; u < unroll; ++u)
          keys.push_back(keyAt(ib, ib.create<arith::AddIOp>(j, indexConstant(ib, u))));
        auto dot = ib.create<scf::ForOp>(indexConstant(ib, 0), indexConstant(ib, steps),
                                         indexConstant(ib, 1), init,
                                         [&](OpBuilder& n2, Location l2, Value c, ValueRange acc) {
                                           ImplicitLocOpBuilder cb(l2, n2);
                                           cb.create<scf::YieldOp>(step(cb, c, acc, keys));
                                         });
        for (int64_t u = 0; u < unroll; ++u)
          for (int64_t r = 0; r < vectors; ++r)
            ib.create<vector::StoreOp>(
                dot.getResult(u * vectors + r), scores,
                ValueRange{ib.create<arith::AddIOp>(j, indexConstant(ib, u)), column(r)});
        ib.create<scf::YieldOp>();
      });
}

// Over the head dim one element a step: q_c's rows times k_c of each key.
SmallVector<Value> UpdateLowering::widenedScoreStep(ImplicitLocOpBuilder& cb, Value c,
                                                    ValueRange acc, ArrayRef<Value> keys) {
  SmallVector<Value> q;
  for (int64_t r = 0; r < vectors; ++r)
    q.push_back(cb.create<vector::LoadOp>(vector, op.getQuery(),
                                          ValueRange{c, indexConstant(cb, r * lanes)}));
  SmallVector<Value> k;
  for (Value key : keys)
    k.push_back(loadF32(cb, op.getKey(), {op.getOffsets()[0], keyHead, key, c}));
  return rankOneUpdate(cb, q, k, acc);
}

// Step 2: masks and modifiers applied in place, and the new running max m'.
void UpdateLowering::emitMaskAndMax(SmallVector<Value>& max, Value maskModKeepsAll) {
  if (!maskModKeepsAll) {
    max = maskAndMax(b, max, ScoreTerms::MaskMod::Evaluate);
    return;
  }
  auto copy = [&](ScoreTerms::MaskMod maskMod) {
    return [&, maskMod](OpBuilder& nested, Location loc) {
      ImplicitLocOpBuilder ib(loc, nested);
      ib.create<scf::YieldOp>(maskAndMax(ib, max, maskMod));
    };
  };
  auto whole = copy(ScoreTerms::MaskMod::KeepsAll), partial = copy(ScoreTerms::MaskMod::Evaluate);
  auto branch = b.create<scf::IfOp>(maskModKeepsAll, whole, partial); // types from the yields
  max.assign(branch.getResults().begin(), branch.getResults().end());
}

SmallVector<Value> UpdateLowering::allocateScorePatches() {
  const bool oneHead = getConstantIntValue(op.getSizes()[1]) == 1;
  return llvm::map_to_vector(ScoreTerms::scoreShapedAux(op), [&](bool shaped) -> Value {
    if (!shaped || !oneHead)
      return {};
    return b.create<memref::AllocaOp>(
        MemRefType::get({static_cast<int64_t>(*op.getMaxKeys()), rows}, b.getF32Type()));
  });
}

void UpdateLowering::readScorePatches() {
  ValueRange offsets = op.getOffsets();
  Value blockKeys = indexConstant(b, static_cast<int64_t>(*op.getMaxKeys()));
  for (auto [aux, buffer] : llvm::enumerate(scorePatches)) {
    if (!buffer)
      continue;
    const ScorePatch patch{op.getAux()[aux], offsets[0], offsets[1], offsets[2],
                           op.getSizes()[2], offsets[3], keyCount};
    readPatch(b, patch, buffer);
    // The task's next key block.
    ScorePatch next = patch;
    next.firstKey = b.create<arith::AddIOp>(offsets[3], blockKeys);
    next.keyCount = blockKeys;
    prefetchPatch(b, next);
  }
}

SmallVector<Value> UpdateLowering::maskAndMax(ImplicitLocOpBuilder& ob, ValueRange max,
                                              ScoreTerms::MaskMod maskMod) {
  const bool readsPatches = llvm::any_of(scorePatches, [](Value patch) { return patch; });
  auto loop = ob.create<scf::ForOp>(
      keyBegin, keyCount, indexConstant(ob, 1), max,
      [&](OpBuilder& nested, Location loc, Value j, ValueRange running) {
        ImplicitLocOpBuilder ib(loc, nested);
        Value key = keyAt(ib, j);
        Value keys = ib.create<vector::BroadcastOp>(
            vectorI32, ib.create<arith::IndexCastOp>(ib.getI32Type(), key));
        SmallVector<Value> next;
        for (int64_t r = 0; r < vectors; ++r) {
          Value raw = ib.create<vector::LoadOp>(vector, scores, ValueRange{j, column(r)});
          Value s = products->scaled(ib, raw);
          std::optional<ScoreTerms::ScoreShapedReads> reads;
          if (readsPatches)
            reads.emplace(scorePatches, SmallVector<Value, 2>{j, column(r)});
          s = terms->apply(ib, s, rowPositions(ib, r), keys, maskMod, reads ? &*reads : nullptr);
          if (s != raw) // without modifiers or a mask the scores stay as they are
            ib.create<vector::StoreOp>(s, scores, ValueRange{j, column(r)});
          next.push_back(ib.create<arith::MaximumFOp>(running[r], s));
        }
        ib.create<scf::YieldOp>(next);
      });
  return SmallVector<Value>(loop.getResults().begin(), loop.getResults().end());
}

// Step 3: P = exp(S - m') in place (0 where S = -inf), and its row sums; dropout's factor
// then weights P for step 4 only.
void UpdateLowering::emitExpAndSum(ArrayRef<Value> offsets, SmallVector<Value>& sum) {
  SmallVector<Value> zeros(vectors, f32Splat(b, lanes, 0));
  auto loop = b.create<scf::ForOp>(
      keyBegin, keyCount, indexConstant(b, 1), zeros,
      [&](OpBuilder& nested, Location loc, Value j, ValueRange running) {
        ImplicitLocOpBuilder ib(loc, nested);
        Value keys = ib.create<vector::BroadcastOp>(
            vectorI32, ib.create<arith::IndexCastOp>(ib.getI32Type(), keyAt(ib, j)));
        SmallVector<Value> next;
        for (int64_t r = 0; r < vectors; ++r) {
          Value s = ib.create<vector::LoadOp>(vector, scores, ValueRange{j, column(r)});
          Value masked =
              ib.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, s, f32Splat(ib, lanes, -kInf));
          Value p = softmax.probability(ib, s, offsets[r]);
          p = ib.create<arith::SelectOp>(masked, f32Splat(ib, lanes, 0), p);
          next.push_back(ib.create<arith::AddFOp>(running[r], p));
          p = terms->dropout(ib, p, rowPositions(ib, r), keys);
          ib.create<vector::StoreOp>(p, scores, ValueRange{j, column(r)});
        }
        ib.create<scf::YieldOp>(next);
      });
  sum.assign(loop.getResults().begin(), loop.getResults().end());
}

// Step 4: acc = alpha * acc + P^T V, valueSplit output columns per pass over the keys (with dot
// products, over pairs of keys: P^T's pair rows and V^T's pairs).
void UpdateLowering::emitValues(ImplicitLocOpBuilder& vb, ArrayRef<Value> alpha, Value first,
                                Value last, bool inPairs, ValueStep step) {
  const int64_t dv = op.getValue().getType().getDimSize(3);
  int64_t split = std::gcd(dv, std::max<int64_t>(1, options.valueSplit));
  Value two = indexConstant(vb, 2);
  // In pairs: the whole pairs of the keys, then an odd last key alone.
  Value begin = inPairs ? vb.create<arith::DivUIOp>(first, two) : first;
  Value end = inPairs ? vb.create<arith::DivUIOp>(last, two) : last;
  vb.create<scf::ForOp>(
      indexConstant(vb, 0), indexConstant(vb, dv), indexConstant(vb, split), std::nullopt,
      [&](OpBuilder& nested, Location loc, Value c0, ValueRange) {
        ImplicitLocOpBuilder ib(loc, nested);
        SmallVector<Value> cols, start;
        for (int64_t cc = 0; cc < split; ++cc)
          cols.push_back(ib.create<arith::AddIOp>(c0, indexConstant(ib, cc)));
        Value zero = indexConstant(ib, 0);
        for (int64_t cc = 0; cc < split; ++cc)
          for (int64_t r = 0; r < vectors; ++r) {
            Value a = ib.create<vector::LoadOp>(vector, op.getAcc(),
                                                ValueRange{zero, zero, cols[cc], column(r)});
            start.push_back(alpha.empty() ? a : ib.create<arith::MulFOp>(a, alpha[r]));
          }
        auto loop = ib.create<scf::ForOp>(
            begin, end, indexConstant(ib, 1), start,
            [&](OpBuilder& n2, Location l2, Value j, ValueRange acc) {
              ImplicitLocOpBuilder jb(l2, n2);
              jb.create<scf::YieldOp>(step(jb, j, acc, cols, /*alone=*/false));
            });
        ValueRange result = loop.getResults();
        if (inPairs) {
          Value odd = ib.create<arith::CmpIOp>(arith::CmpIPredicate::ne,
                                               ib.create<arith::RemUIOp>(last, two), zero);
          auto oddKey = ib.create<scf::IfOp>(
              odd,
              [&](OpBuilder& n2, Location l2) {
                ImplicitLocOpBuilder jb(l2, n2);
                jb.create<scf::YieldOp>(step(jb, end, result, cols, /*alone=*/true));
              },
              [&](OpBuilder& n2, Location l2) { n2.create<scf::YieldOp>(l2, result); });
          result = oddKey.getResults();
        }
        for (int64_t cc = 0; cc < split; ++cc)
          for (int64_t r = 0; r < vectors; ++r)
            ib.create<vector::StoreOp>(result[cc * vectors + r], op.getAcc(),
                                       ValueRange{zero, zero, cols[cc], column(r)});
        ib.create<scf::YieldOp>();
      });
}

void UpdateLowering::emitWidenedValues(ArrayRef<Value> alpha) {
  // V's elements are read where they lie: where its columns are contiguous, through a view
  // whose column stride is a static 1, so that a step's columns are constant offsets from one
  // address (through the dynamic stride, each column's offset lived in a register or on the
  // stack: PV ran at about half the FMA rate on AVX2).
  auto emit = [&](ImplicitLocOpBuilder& vb, Value rows) {
    emitValues(vb, alpha, keyBegin, keyCount, /*inPairs=*/false,
               [&](ImplicitLocOpBuilder& jb, Value j, ValueRange acc, ArrayRef<Value> cols, bool) {
                 return widenedValueStep(jb, rows, j, acc, cols);
               });
  };
  ifUnitInnerStride(
      b, op.getValue(), [&](ImplicitLocOpBuilder& tb, Value view) { emit(tb, view); },
      [&](ImplicitLocOpBuilder& eb) { emit(eb, op.getValue()); });
}

// acc += P[j] V[key j], V (or `rows`, a view of it) widened to f32, for the columns `cols`.
SmallVector<Value> UpdateLowering::widenedValueStep(ImplicitLocOpBuilder& jb, Value rows, Value j,
                                                    ValueRange acc, ArrayRef<Value> cols) {
  SmallVector<Value> p;
  for (int64_t r = 0; r < vectors; ++r)
    p.push_back(jb.create<vector::LoadOp>(vector, scores, ValueRange{j, column(r)}));
  Value key = keyAt(jb, j);
  SmallVector<Value> v;
  for (Value col : cols)
    v.push_back(loadF32(jb, rows, {op.getOffsets()[0], kvHead, key, col}));
  return rankOneUpdate(jb, p, v, acc);
}

DomainCorners UpdateLowering::domainCorners(Value off) {
  ValueRange offsets = op.getOffsets(), sizes = op.getSizes();
  Value one = indexConstant(b, 1);
  auto last = [&](int k) {
    return b.create<arith::SubIOp>(b.create<arith::AddIOp>(offsets[k], sizes[k]), one);
  };
  Value seqQ = op.getSeqQ(), seqK = b.create<memref::DimOp>(op.getKey(), 2);
  // Rows and keys past Tq and Tk are not attended: the corners stop at them.
  Value lastRow = b.create<arith::MinSIOp>(last(2), b.create<arith::SubIOp>(seqQ, one));
  Value lastKey = b.create<arith::MinSIOp>(last(3), b.create<arith::SubIOp>(seqK, one));
  DomainCorners corners;
  auto set = [&](ExpressionArgument argument, Value lo, Value hi) {
    corners.first[index(argument)] = b.create<arith::IndexCastOp>(b.getI32Type(), lo);
    corners.last[index(argument)] = b.create<arith::IndexCastOp>(b.getI32Type(), hi);
  };
  set(ExpressionArgument::B, offsets[0], last(0));
  set(ExpressionArgument::H, offsets[1], last(1));
  set(ExpressionArgument::G, kvHead, ScoreTerms::kvHeadOf(b, op, last(1)));
  set(ExpressionArgument::QIdx, offsets[2], lastRow);
  set(ExpressionArgument::QPos, b.create<arith::AddIOp>(offsets[2], off),
      b.create<arith::AddIOp>(lastRow, off));
  set(ExpressionArgument::KvIdx, offsets[3], lastKey);
  set(ExpressionArgument::SeqQ, seqQ, seqQ);
  set(ExpressionArgument::SeqK, seqK, seqK);
  return corners;
}

namespace {

// Keys [first, first + count) of the domain, the last cut at the domain's last key.
DomainCorners withKeys(ImplicitLocOpBuilder& b, const DomainCorners& corners, Value first,
                       Value count) {
  const size_t key = index(ExpressionArgument::KvIdx);
  auto i32 = [&](Value index) { return b.create<arith::IndexCastOp>(b.getI32Type(), index); };
  DomainCorners keys = corners;
  Value firstKey = b.create<arith::AddIOp>(corners.first[key], i32(first));
  keys.first[key] = firstKey;
  keys.last[key] = b.create<arith::MinSIOp>(
      b.create<arith::SubIOp>(b.create<arith::AddIOp>(firstKey, i32(count)),
                              b.create<arith::ConstantIntOp>(1, 32)),
      corners.last[key]);
  return keys;
}

} // namespace

UpdateLowering::LiveKeys UpdateLowering::liveKeys(const DomainCorners& corners) {
  constexpr int64_t kLiveChunk = 16;
  Value keys = op.getSizes()[3], one = indexConstant(b, 1), chunk = indexConstant(b, kLiveChunk);
  Value chunks = b.create<arith::CeilDivUIOp>(keys, chunk);
  Value no = b.create<arith::ConstantIntOp>(0, 1);
  // Carried: the first live chunk's first key (`keys` while none is), the last live chunk's
  // end, whether a chunk from the first live one on may mask a score, and whether one up to the
  // last live chunk may (the dead chunks on either side are never attended).
  auto loop = b.create<scf::ForOp>(indexConstant(b, 0), chunks, one,
                                   ValueRange{keys, indexConstant(b, 0), no, no});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value first = b.create<arith::MulIOp>(loop.getInductionVar(), chunk);
    Value end = b.create<arith::MinUIOp>(b.create<arith::AddIOp>(first, chunk), keys);
    DomainCorners chunkCorners =
        withKeys(b, corners, first, b.create<arith::SubIOp>(end, first));
    MaskBounds bounds = maskBounds(b, op.getMaskMod(), op.getAux(), chunkCorners);
    ValueRange carried = loop.getRegionIterArgs();
    Value started = b.create<arith::OrIOp>(
        b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, carried[0], keys), bounds.mayKeep);
    Value maskedSinceFirst = b.create<arith::AndIOp>(
        started, b.create<arith::OrIOp>(carried[2], bounds.mayMask));
    b.create<scf::YieldOp>(ValueRange{
        b.create<arith::SelectOp>(bounds.mayKeep,
                                  b.create<arith::MinUIOp>(carried[0], first), carried[0]),
        b.create<arith::SelectOp>(bounds.mayKeep, end, carried[1]), maskedSinceFirst,
        b.create<arith::SelectOp>(bounds.mayKeep, maskedSinceFirst, carried[3])});
  }
  Value keepsAll = b.create<arith::XOrIOp>(loop.getResult(3), b.create<arith::ConstantIntOp>(1, 1));
  // No live chunk: begin = end = 0.
  return {b.create<arith::MinUIOp>(loop.getResult(0), loop.getResult(1)), loop.getResult(1),
          keepsAll};
}

LogicalResult UpdateLowering::emit() {
  if (failed(check()))
    return failure();
  products->prepare();
  // The scores buffer goes on the stack of the task that owns the update.
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(taskStackBlock(op));
    scores = b.create<memref::AllocaOp>(
        MemRefType::get({static_cast<int64_t>(*op.getMaxKeys()), rows}, b.getF32Type()));
    scorePatches = allocateScorePatches();
  }
  Value maskModKeepsAll = placeKeys();
  products->scores();
  readScorePatches();

  // 2-3. m' = max(m, rowmax S); alpha = exp(m - m') (0 while m = -inf); l' = alpha l + sum P.
  Value zero = indexConstant(b, 0);
  SmallVector<Value> oldMax, oldSum;
  for (int64_t r = 0; r < vectors; ++r) {
    oldMax.push_back(
        b.create<vector::LoadOp>(vector, op.getMax(), ValueRange{zero, zero, column(r)}));
    oldSum.push_back(
        b.create<vector::LoadOp>(vector, op.getSum(), ValueRange{zero, zero, column(r)}));
  }
  SmallVector<Value> blockMax = oldMax;
  emitMaskAndMax(blockMax, maskModKeepsAll);
  const RowMaxima m = rowMaxima(oldMax, blockMax);
  // P = exp(S - m' - c): every probability scaled by e^-c, so acc and l cannot overflow
  // (Semantics/OnlineSoftmax.h); alpha is a ratio of scales and keeps exp(m - m').
  SmallVector<Value> probabilityOffsets, blockSum;
  for (Value safe : m.safeMax)
    probabilityOffsets.push_back(softmax.probabilityOffset(b, safe));
  products->probabilities(probabilityOffsets, blockSum);
  for (int64_t r = 0; r < vectors; ++r) {
    Value sum = softmax.carriedSum(b, m.alpha[r], oldSum[r], blockSum[r]);
    b.create<vector::StoreOp>(m.newMax[r], op.getMax(), ValueRange{zero, zero, column(r)});
    b.create<vector::StoreOp>(sum, op.getSum(), ValueRange{zero, zero, column(r)});
  }
  // 4. acc = alpha acc + P^T V.
  products->values(m.alpha, m.anyMoved);
  return success();
}

LogicalResult UpdateLowering::check() {
  if (!op.hasPackedQuery())
    return op.emitOpError() << "lower_to_vectors needs a packed query (pack_query first)";
  if (!op.getMaxKeys())
    return op.emitOpError() << "lower_to_vectors needs max_keys (tile_keys first)";
  if (ShapedType::isDynamic(rows) || lanes <= 0 || rows % lanes != 0)
    return op.emitOpError() << "lower_to_vectors: the tile's " << rows
                            << " rows must be a multiple of the vector width " << lanes;
  if (options.keyUnroll <= 0)
    return op.emitOpError() << "lower_to_vectors: key_unroll must be positive";
  return success();
}

Value UpdateLowering::placeKeys() {
  ValueRange offsets = op.getOffsets();
  kvHead = ScoreTerms::kvHeadOf(b, op, offsets[1]);
  keyHead = ScoreTerms::keyHeadOf(b, op, offsets[1]);
  Value off = ScoreTerms::positionOffset(b, op);
  keyBegin = indexConstant(b, 0);
  keyCount = op.getSizes()[3];
  Value maskModKeepsAll;
  if (!op.getMaskMod().empty()) {
    const LiveKeys live = liveKeys(domainCorners(off));
    // The live count is at most nj; saying so (nj is min(max_keys, ...) from tile_keys) lets
    // LLVM bound the key loops by the block: without the min, a causal kernel (H 8, d 64,
    // T 2048) ran 1.35x slower; with it, the document mask of docs/benchmarks.md runs about 5%
    // slower (why is not understood).
    keyCount = b.create<arith::MinUIOp>(live.end, keyCount);
    // A mask of comparisons of sums (causal, windows) has its key range from tile_keys
    // (KeyRange.h), so the block's leading chunks are live, and a key loop from a run-time first
    // key made the causal kernel 1.2x slower; other masks (block patterns, documents, draws)
    // skip the dead chunks a block starts with.
    if (!comparesSums(op.getMaskMod())) {
      keyBegin = b.create<arith::MinUIOp>(live.begin, keyCount);
      maskModKeepsAll = live.keepsAll;
    }
    auto attend = b.create<scf::IfOp>(
        b.create<arith::CmpIOp>(arith::CmpIPredicate::ugt, keyCount, indexConstant(b, 0)),
        /*withElseRegion=*/false);
    b.setInsertionPoint(attend.thenBlock()->getTerminator());
  }
  Value first =
      b.create<arith::IndexCastOp>(b.getI32Type(), b.create<arith::AddIOp>(offsets[2], off));
  SmallVector<int32_t> iota(lanes);
  std::iota(iota.begin(), iota.end(), 0);
  positions0 = b.create<arith::AddIOp>(
      b.create<vector::BroadcastOp>(vectorI32, first),
      b.create<arith::ConstantOp>(DenseElementsAttr::get(vectorI32, ArrayRef<int32_t>(iota))));
  terms.emplace(b, op, offsets[0], offsets[1]);
  return maskModKeepsAll;
}

Operation* UpdateLowering::beforeKeyLoop() {
  auto keyLoop = op->getParentOfType<scf::ForOp>();
  if (keyLoop &&
      keyLoop->getParentOfType<scf::ForallOp>() == op->getParentOfType<scf::ForallOp>() &&
      !keyLoop->isAncestor(op.getQuery().getParentBlock()->getParentOp()))
    return keyLoop;
  return op;
}

UpdateLowering::RowMaxima UpdateLowering::rowMaxima(ArrayRef<Value> oldMax,
                                                    ArrayRef<Value> blockMax) {
  // A row keeps its max until a block's exceeds it by more than kMaxSlack (FlashAttention-4's
  // conditional rescaling): its P then stay below e^(kMaxSlack - c), and alpha is 1, so that
  // on AMX tiles a block no row's max moved in skips acc's rescaling pass.
  RowMaxima m;
  m.anyMoved = b.create<arith::ConstantIntOp>(0, 1);
  for (int64_t r = 0; r < vectors; ++r) {
    Value moved =
        b.create<arith::CmpFOp>(arith::CmpFPredicate::OGT, blockMax[r],
                                b.create<arith::AddFOp>(oldMax[r], f32Splat(b, lanes, kMaxSlack)));
    m.newMax.push_back(b.create<arith::SelectOp>(moved, blockMax[r], oldMax[r]));
    m.safeMax.push_back(softmax.finiteMax(b, m.newMax[r]));
    m.alpha.push_back(b.create<arith::SelectOp>(
        moved, softmax.rescaleFactor(b, oldMax[r], m.safeMax[r]), f32Splat(b, lanes, 1)));
    m.anyMoved = b.create<arith::OrIOp>(
        m.anyMoved, b.create<vector::ReductionOp>(vector::CombiningKind::OR, moved));
  }
  return m;
}

namespace {

// paired: K and V^T laid out for bf16 pair products (PairedOperands.h: AMX tiles or dot
// products, as options say), or null for f32 FMAs; additiveKeys: an additive score's key
// exponentials (AdditiveKeys.h), or null.
LogicalResult lowerUpdate(ImplicitLocOpBuilder& b, OnlineUpdateOp op, const VectorOptions& options,
                          const PairedOperands* paired, Value additiveKeys) {
  return UpdateLowering(b, op, options, paired, additiveKeys).emit();
}

} // namespace

} // namespace prefill

namespace {

// A widened CPU update's K and V rows that lie apart, read from copies of them together, each
// made once per kernel (`together`: rows to copy). A GPU thread (vectorWidth 1) reads a key's
// row alone; paged and quantized caches are gathered into contiguous rows already; an additive
// score reads its keys as the exponentials AdditiveKeys lays out, and V as sdpa does.
void readRowsTogether(RewriterBase& rewriter, OnlineUpdateOp update,
                      llvm::DenseMap<Value, Value>& together) {
  if (update.getBlockTable() || update.getKeyScale())
    return;
  SmallVector<OpOperand*, 2> rowOperands = {&update.getValueMutable()};
  if (!update.getScoreWeights())
    rowOperands.push_back(&update.getKeyMutable());
  for (OpOperand* rows : rowOperands)
    if (rowsLieApart(update, rows->get())) {
      auto it = together.find(rows->get());
      if (it == together.end())
        it = together.try_emplace(rows->get(), copyRowsTogether(rewriter, update, rows->get()))
                 .first;
      rows->set(it->second);
    }
}

} // namespace

LogicalResult lowerOnlineOpsToVectors(RewriterBase& rewriter, Operation* root,
                                      const VectorOptions& options) {
  SmallVector<Operation*> ops;
  root->walk([&](Operation* op) {
    if (isa<OnlineInitOp, PackQueryOp, OnlineUpdateOp, OnlineFinalizeOp>(op))
      ops.push_back(op);
  });
  // K and V laid out for paired products once per kernel and block size, an additive
  // score's key exponentials once per kernel, and rows lying apart copied together once per
  // kernel, whichever updates read them.
  llvm::DenseMap<std::tuple<Value, Value, int64_t>, PairedOperands> laidOut;
  llvm::DenseMap<Value, Value> additiveKeys, together;
  for (Operation* op : ops) {
    auto update = dyn_cast<OnlineUpdateOp>(op);
    std::optional<PairedOperands> paired;
    if (update && (options.amx || options.dot) && options.vectorWidth == prefill::kTileRows &&
        takesPairedProducts(update)) {
      const int64_t blockKeys = static_cast<int64_t>(*update.getMaxKeys());
      auto key = std::make_tuple(update.getKey(), update.getValue(), blockKeys);
      auto it = laidOut.find(key);
      if (it == laidOut.end())
        it = laidOut.try_emplace(key, layOutPairedOperands(rewriter, update, blockKeys)).first;
      paired = it->second;
    }
    if (update && !paired && options.vectorWidth > 1)
      readRowsTogether(rewriter, update, together);
    Value exponentials;
    if (update && update.getScoreWeights()) {
      auto it = additiveKeys.find(update.getKey());
      if (it == additiveKeys.end())
        it = additiveKeys
                 .try_emplace(update.getKey(),
                              layOutAdditiveKeys(rewriter, update, options.vectorWidth))
                 .first;
      exponentials = it->second;
    }
    rewriter.setInsertionPoint(op);
    ImplicitLocOpBuilder b(op->getLoc(), rewriter);
    if (auto init = dyn_cast<OnlineInitOp>(op))
      lowerInit(b, init);
    else if (auto pack = dyn_cast<PackQueryOp>(op))
      lowerPack(b, pack);
    else if (auto finalize = dyn_cast<OnlineFinalizeOp>(op))
      lowerFinalize(b, finalize);
    else if (failed(prefill::lowerUpdate(b, update, options, paired ? &*paired : nullptr,
                                         exponentials)))
      return failure();
    rewriter.eraseOp(op);
  }
  return success();
}

} // namespace attnc::attn
