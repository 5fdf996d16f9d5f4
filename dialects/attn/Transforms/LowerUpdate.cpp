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
#include "attn/Transforms/ExpressionBounds.h"
#include "attn/Transforms/LowerStateOps.h"
#include "attn/Transforms/PairedOperands.h"
#include "attn/Transforms/ScoreTerms.h"
#include "attn/Transforms/Transforms.h"
#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
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
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// An AMX tile: 16 rows of 16 f32 (S^T, O^T) or of 32 bf16 (K, V^T and the pairs of Q^T, P^T);
// the dot products' vectors hold 16 of those rows' f32 or 16 pairs, and V^T's chunks 32 keys.
// A step holds 2 x 2 accumulators (2 tiles of keys or of output columns by 2 tiles of query
// rows), its 2 A tiles and one B tile: 7 of the 8 tile registers, two products per load of A
// or B (steps of one A by 3 row tiles, 4 loads for 3 products, ran 1.09x slower at H 8, d 128,
// T 2048, one thread; docs/benchmarks.md).
constexpr int64_t kTileRows = 16, kTilePairs = 16, kTileBf16 = 32;
constexpr int64_t kStepTiles = 2;

// How far a block's max may exceed a row's before the row takes it (e^8 ~ 3000): with the
// shift c = ln 2^31 (OnlineSoftmax.h), P <= 2^-19.5, still far from overflowing l or acc.
constexpr double kMaxSlack = 8.0;

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

class UpdateProducts;

class UpdateLowering {
public:
  // paired: the laid-out K and V^T when the products take bf16 pairs (options.amx picks tiles
  // over dot products), else null.
  UpdateLowering(ImplicitLocOpBuilder& b, OnlineUpdateOp op, const VectorOptions& options,
                 const PairedOperands* paired);
  ~UpdateLowering();

  LogicalResult emit();

private:
  friend class WidenedProducts;
  friend class DotProducts;
  friend class AmxProducts;

  // What lower_to_vectors takes: a packed query, max_keys, whole vectors of rows.
  LogicalResult check();
  // kvHead, the keys the update attends (keyBegin, keyCount: the mask's live chunks), the rows'
  // positions and the score terms; returns maskModKeepsAll (emitMaskAndMax). With mask_mod,
  // what follows goes into an scf.if on a live key.
  Value placeKeys();
  // The rows' new maxima m', their finite m' and alpha, and an i1, whether any row's moved.
  struct RowMaxima {
    SmallVector<Value> newMax, safeMax, alpha;
    Value anyMoved;
  };
  RowMaxima rowMaxima(ArrayRef<Value> oldMax, ArrayRef<Value> blockMax);
  // The corners of the update's domain, its rows and keys cut at Tq and Tk, for the bounds of
  // mask_mod (ExpressionBounds.h). off is the key position of query row 0
  // (ScoreTerms::positionOffset); kvHead is set.
  DomainCorners domainCorners(Value off);
  // From mask_mod's bounds over each chunk of kLiveChunk keys: the keys [begin, end) the update
  // must attend, from the first to the last chunk in which the region can keep a score of the
  // domain's rows (end 0 when it keeps none; the keys outside are all masked, and masked keys
  // leave the state as it was), and `keepsAll`, an i1 true when it keeps every score of those
  // keys.
  struct LiveKeys {
    Value begin, end, keepsAll;
  };
  LiveKeys liveKeys(const DomainCorners& corners);
  Value column(int64_t r) { return indexConstant(b, r * lanes); }
  // The query row positions i + off of the lanes of vector r (i32).
  Value rowPositions(ImplicitLocOpBuilder& ib, int64_t r) {
    return ib.create<arith::AddIOp>(
        positions0, splatConstant(ib, vectorI32, static_cast<double>(r * lanes)));
  }
  Value keyAt(ImplicitLocOpBuilder& ib, Value j) {
    return ib.create<arith::AddIOp>(op.getOffsets()[3], j);
  }
  // A step of the contraction over the head dim for a register tile of `keys`: the tile's
  // accumulators after step c.
  using ScoreStep = function_ref<SmallVector<Value>(ImplicitLocOpBuilder&, Value c, ValueRange acc,
                                                    ArrayRef<Value> keys)>;
  // S for the keys attended: whole groups of keyUnroll keys, then the rest one at a time, each
  // group a register tile over `steps` steps.
  void emitScoresInGroups(int64_t steps, ScoreStep step);
  void emitScores(Value begin, Value end, int64_t unroll, int64_t steps, ScoreStep step);
  SmallVector<Value> widenedScoreStep(ImplicitLocOpBuilder& cb, Value c, ValueRange acc,
                                      ArrayRef<Value> keys);
  SmallVector<Value> pairScoreStep(ImplicitLocOpBuilder& cb, Value c, ValueRange acc,
                                   ArrayRef<Value> keys, Value queryPairs);
  // maskModKeepsAll: null, or an i1 that picks the step's copy without the mask_mod region.
  void emitMaskAndMax(SmallVector<Value>& max, Value maskModKeepsAll);
  SmallVector<Value> maskAndMax(ImplicitLocOpBuilder& ob, ValueRange max,
                                ScoreTerms::MaskMod maskMod);
  void emitExpAndSum(ArrayRef<Value> offsets, SmallVector<Value>& sum);
  // A step over keys of PV for the columns `cols`: key j, or with `inPairs` the pair j (keys
  // 2j and 2j + 1, `alone`: 2j only); the accumulators after it.
  using ValueStep = function_ref<SmallVector<Value>(ImplicitLocOpBuilder&, Value j, ValueRange acc,
                                                    ArrayRef<Value> cols, bool alone)>;
  // acc = alpha acc (no scaling for an empty alpha) + P^T V over the keys [first, last) (first
  // even in pairs, and an odd last key alone).
  void emitValues(ArrayRef<Value> alpha, Value first, Value last, bool inPairs, ValueStep step);
  SmallVector<Value> widenedValueStep(ImplicitLocOpBuilder& jb, Value j, ValueRange acc,
                                      ArrayRef<Value> cols);
  SmallVector<Value> pairValueStep(ImplicitLocOpBuilder& jb, Value j, ValueRange acc,
                                   ArrayRef<Value> cols, Value probabilityPairs, bool alone);
  // Paired products: Q^T's pairs of rows from the packed query unscaled (q, a bf16 input, is
  // exact in bf16 where q times the scale is not: FlashAttention scales S in f32), once per
  // task before the key loop.
  Value emitQueryPairs();
  // zeros: kStepTiles^2 tiles of f32 zeros, [16 x kStepTiles^2, 16], on the task's stack.
  Value emitZeroTiles();
  void emitAmxScores(Value queryPairs, Value zeros);
  // wholeBlock: the pair rows outside the keys attended zero too (AMX tiles multiply the
  // whole block).
  void emitExpAndPairs(ArrayRef<Value> offsets, SmallVector<Value>& sum, Value pairs,
                       bool wholeBlock);
  // rescale: an i1, whether any row's alpha differs from 1.
  void emitAmxValues(ArrayRef<Value> alpha, Value pairs, Value rescale);
  // Two f32 vectors of the same 16 query rows as one row of bf16 pairs (even[l], odd[l]).
  static Value pairRows(ImplicitLocOpBuilder& ib, Value even, Value odd);

  ImplicitLocOpBuilder& b;
  OnlineUpdateOp op;
  const VectorOptions& options;
  const PairedOperands* paired;
  const std::unique_ptr<UpdateProducts> products; // chosen once, in the constructor
  const double scale; // the softmax scale, which the packed query carries
  const OnlineState softmax;
  const int64_t lanes, rows, vectors;
  VectorType vector, vectorI32;
  Value scores;     // S: [max_keys, rows] f32 on the task's stack
  Value kvHead;     // h / (H / H_kv)
  Value keyBegin;   // the first key the update attends (a multiple of the live chunk)
  Value keyCount;   // the end of the keys it attends, at most nj
  Value positions0; // i0 + off + lane, the key positions of the first vector's rows (i32)
  std::optional<ScoreTerms> terms;
};

// One way of multiplying of the update (Kit/Products.h holds the instructions), chosen once per
// kernel: the steps that multiply (1: S = Q K^T; 3: P in the form step 4 reads; 4: acc += P^T
// V) ask it, and no emit method asks which kind it is.
class UpdateProducts {
public:
  explicit UpdateProducts(UpdateLowering& u) : u(u) {}
  virtual ~UpdateProducts() = default;
  // Before the key loop: the operands the products take from the task's stack.
  virtual void prepare() {}
  // Step 1: S for the keys attended.
  virtual void scores() = 0;
  // S as the terms take it (paired products multiply the query unscaled).
  virtual Value scaled(ImplicitLocOpBuilder& ib, Value s) { return s; }
  // Step 3: P and its row sums into blockSum, where step 4 reads them.
  virtual void probabilities(ArrayRef<Value> offsets, SmallVector<Value>& blockSum) = 0;
  // Step 4: acc = alpha acc + P^T V (anyMoved: an i1, whether any row's alpha differs from 1).
  virtual void values(ArrayRef<Value> alpha, Value anyMoved) = 0;

protected:
  UpdateLowering& u;
};

// f32 FMAs, bf16 and f16 widened: register tiles of rank-1 updates, P in S.
class WidenedProducts final : public UpdateProducts {
public:
  using UpdateProducts::UpdateProducts;
  void scores() override {
    u.emitScoresInGroups(
        u.op.getKey().getType().getDimSize(3),
        [&](ImplicitLocOpBuilder& cb, Value c, ValueRange acc, ArrayRef<Value> keys) {
          return u.widenedScoreStep(cb, c, acc, keys);
        });
  }
  void probabilities(ArrayRef<Value> offsets, SmallVector<Value>& blockSum) override {
    u.emitExpAndSum(offsets, blockSum);
  }
  void values(ArrayRef<Value> alpha, Value) override {
    u.emitValues(alpha, u.keyBegin, u.keyCount, /*inPairs=*/false,
                 [&](ImplicitLocOpBuilder& jb, Value j, ValueRange acc, ArrayRef<Value> cols,
                     bool) { return u.widenedValueStep(jb, j, acc, cols); });
  }
};

// bf16 pairs as AVX512-BF16 dot products (vdpbf16ps) in the same register tiles, Q^T and P^T
// in pairs of rows, K and V^T as PairedOperands lays them out.
class DotProducts : public UpdateProducts {
public:
  using UpdateProducts::UpdateProducts;
  void prepare() override { queryPairs = u.emitQueryPairs(); }
  void scores() override {
    u.emitScoresInGroups(
        u.op.getKey().getType().getDimSize(3) / 2,
        [&](ImplicitLocOpBuilder& cb, Value c, ValueRange acc, ArrayRef<Value> keys) {
          return u.pairScoreStep(cb, c, acc, keys, queryPairs);
        });
  }
  Value scaled(ImplicitLocOpBuilder& ib, Value s) override {
    return ib.create<arith::MulFOp>(s, f32Splat(ib, u.lanes, u.scale));
  }
  void probabilities(ArrayRef<Value> offsets, SmallVector<Value>& blockSum) override {
    {
      OpBuilder::InsertionGuard guard(u.b);
      u.b.setInsertionPointToStart(taskStackBlock(u.op));
      probabilityPairs = u.b.create<memref::AllocaOp>(MemRefType::get(
          {static_cast<int64_t>(*u.op.getMaxKeys()) / 2, u.rows * 2}, u.b.getBF16Type()));
    }
    u.emitExpAndPairs(offsets, blockSum, probabilityPairs, wholeBlock());
  }
  void values(ArrayRef<Value> alpha, Value) override {
    u.emitValues(
        alpha, u.keyBegin, u.keyCount, /*inPairs=*/true,
        [&](ImplicitLocOpBuilder& jb, Value j, ValueRange acc, ArrayRef<Value> cols, bool alone) {
          return u.pairValueStep(jb, j, acc, cols, probabilityPairs, alone);
        });
  }

protected:
  // Whether step 4 multiplies the whole block (tiles), so that P^T's rows outside the keys
  // attended must be zero.
  virtual bool wholeBlock() const { return false; }

  Value queryPairs, probabilityPairs;
};

// bf16 pairs on AMX tiles: S^T = K Q^T and O^T += V^T P^T, tiles of the whole block.
class AmxProducts final : public DotProducts {
public:
  using DotProducts::DotProducts;
  void prepare() override {
    DotProducts::prepare();
    zeroTiles = u.emitZeroTiles();
  }
  void scores() override { u.emitAmxScores(queryPairs, zeroTiles); }
  void values(ArrayRef<Value> alpha, Value anyMoved) override {
    u.emitAmxValues(alpha, probabilityPairs, anyMoved);
  }

private:
  bool wholeBlock() const override { return true; }

  Value zeroTiles;
};

// paired: the laid-out K and V^T when the products take bf16 pairs (options.amx picks tiles
// over dot products), else null.
UpdateLowering::UpdateLowering(ImplicitLocOpBuilder& b, OnlineUpdateOp op,
                               const VectorOptions& options, const PairedOperands* paired)
    : b(b), op(op), options(options), paired(paired),
      products(!paired       ? std::unique_ptr<UpdateProducts>(new WidenedProducts(*this))
               : options.amx ? std::unique_ptr<UpdateProducts>(new AmxProducts(*this))
                             : std::unique_ptr<UpdateProducts>(new DotProducts(*this))),
      scale(op.getScale().convertToDouble()), lanes(options.vectorWidth),
      rows(op.getAcc().getType().getDimSize(3)), vectors(rows / lanes),
      vector(VectorType::get({lanes}, b.getF32Type())),
      vectorI32(VectorType::get({lanes}, b.getI32Type())) {}

UpdateLowering::~UpdateLowering() = default;

void UpdateLowering::emitScoresInGroups(int64_t steps, ScoreStep step) {
  Value unroll = indexConstant(b, options.keyUnroll);
  Value span = b.create<arith::SubIOp>(keyCount, keyBegin);
  Value whole = b.create<arith::SubIOp>(keyCount, b.create<arith::RemUIOp>(span, unroll));
  emitScores(keyBegin, whole, options.keyUnroll, steps, step);
  emitScores(whole, keyCount, 1, steps, step);
}

// S[j, :] for keys j in [begin, end), `unroll` keys per step (end - begin divisible by it).
void UpdateLowering::emitScores(Value begin, Value end, int64_t unroll, int64_t steps,
                                ScoreStep step) {
  b.create<scf::ForOp>(
      begin, end, indexConstant(b, unroll), std::nullopt,
      [&](OpBuilder& nested, Location loc, Value j, ValueRange) {
        ImplicitLocOpBuilder ib(loc, nested);
        SmallVector<Value> zeros(unroll * vectors, f32Splat(ib, lanes, 0));
        SmallVector<Value> keys;
        for (int64_t u = 0; u < unroll; ++u)
          keys.push_back(keyAt(ib, ib.create<arith::AddIOp>(j, indexConstant(ib, u))));
        auto dot = ib.create<scf::ForOp>(
            indexConstant(ib, 0), indexConstant(ib, steps), indexConstant(ib, 1), zeros,
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
    k.push_back(loadF32(cb, op.getKey(), {op.getOffsets()[0], kvHead, key, c}));
  return rankOneUpdate(cb, q, k, acc);
}

// Over the head dim a pair a step (c: pair c), Q^T's pair rows against each key's pair.
SmallVector<Value> UpdateLowering::pairScoreStep(ImplicitLocOpBuilder& cb, Value c, ValueRange acc,
                                                 ArrayRef<Value> keys, Value queryPairs) {
  auto pairsType = VectorType::get({2 * lanes}, cb.getBF16Type());
  SmallVector<Value> q, k;
  for (int64_t r = 0; r < vectors; ++r)
    q.push_back(cb.create<vector::LoadOp>(pairsType, queryPairs,
                                          ValueRange{c, indexConstant(cb, r * 2 * lanes)}));
  Value element = cb.create<arith::MulIOp>(c, indexConstant(cb, 2));
  for (Value key : keys)
    k.push_back(loadBf16Pair(cb, paired->keys, {op.getOffsets()[0], kvHead, key, element}));
  return pairDotUpdate(cb, q, k, acc);
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

SmallVector<Value> UpdateLowering::maskAndMax(ImplicitLocOpBuilder& ob, ValueRange max,
                                              ScoreTerms::MaskMod maskMod) {
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
          s = terms->apply(ib, s, rowPositions(ib, r), keys, maskMod);
          if (s != raw) // without modifiers or a mask the scores stay as they are
            ib.create<vector::StoreOp>(s, scores, ValueRange{j, column(r)});
          next.push_back(ib.create<arith::MaximumFOp>(running[r], s));
        }
        ib.create<scf::YieldOp>(next);
      });
  return SmallVector<Value>(loop.getResults().begin(), loop.getResults().end());
}

// Step 3 for paired products: P = exp(S - m') as pairs of rows of bf16 into `pairs` (P^T, the
// B operand of PV), its row sums, dropout's factor then; a key outside the keys attended in an
// attended pair gets P = 0, and for AMX tiles, which multiply the whole block, the pair rows
// outside them are zero.
void UpdateLowering::emitExpAndPairs(ArrayRef<Value> offsets, SmallVector<Value>& sum, Value pairs,
                                     bool wholeBlock) {
  const int64_t maxKeys = static_cast<int64_t>(*op.getMaxKeys());
  Value two = indexConstant(b, 2), zero = indexConstant(b, 0);
  Value pairBegin = b.create<arith::DivUIOp>(keyBegin, two);
  Value pairEnd = b.create<arith::CeilDivUIOp>(keyCount, two);
  auto zeroRows = [&](Value from, Value to) {
    forRange(b, from, to, [&](ImplicitLocOpBuilder& zb, Value p) {
      Value none = zb.create<arith::ConstantOp>(DenseElementsAttr::get(
          VectorType::get({2 * lanes}, zb.getBF16Type()), zb.getFloatAttr(zb.getBF16Type(), 0)));
      for (int64_t r = 0; r < vectors; ++r)
        zb.create<vector::StoreOp>(none, pairs, ValueRange{p, indexConstant(zb, r * 2 * lanes)});
    });
  };
  if (wholeBlock) {
    zeroRows(zero, pairBegin);
    zeroRows(pairEnd, indexConstant(b, maxKeys / 2));
  }
  SmallVector<Value> zeros(vectors, f32Splat(b, lanes, 0));
  auto loop = b.create<scf::ForOp>(
      pairBegin, pairEnd, indexConstant(b, 1), zeros,
      [&](OpBuilder& nested, Location loc, Value p, ValueRange running) {
        ImplicitLocOpBuilder ib(loc, nested);
        SmallVector<Value> next(running.begin(), running.end());
        SmallVector<SmallVector<Value>> probabilities(2);
        for (int64_t e = 0; e < 2; ++e) {
          Value j =
              ib.create<arith::AddIOp>(ib.create<arith::MulIOp>(p, two), indexConstant(ib, e));
          Value outside = ib.create<arith::OrIOp>(
              ib.create<arith::CmpIOp>(arith::CmpIPredicate::ult, j, keyBegin),
              ib.create<arith::CmpIOp>(arith::CmpIPredicate::uge, j, keyCount));
          Value keys = ib.create<vector::BroadcastOp>(
              vectorI32, ib.create<arith::IndexCastOp>(ib.getI32Type(), keyAt(ib, j)));
          for (int64_t r = 0; r < vectors; ++r) {
            Value s = ib.create<vector::LoadOp>(vector, scores, ValueRange{j, column(r)});
            Value dropped = ib.create<arith::OrIOp>(
                ib.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, s, f32Splat(ib, lanes, -kInf)),
                ib.create<vector::BroadcastOp>(VectorType::get({lanes}, ib.getI1Type()), outside));
            Value x = softmax.probability(ib, s, offsets[r]);
            x = ib.create<arith::SelectOp>(dropped, f32Splat(ib, lanes, 0), x);
            next[r] = ib.create<arith::AddFOp>(next[r], x);
            probabilities[e].push_back(terms->dropout(ib, x, rowPositions(ib, r), keys));
          }
        }
        for (int64_t r = 0; r < vectors; ++r)
          ib.create<vector::StoreOp>(pairRows(ib, probabilities[0][r], probabilities[1][r]), pairs,
                                     ValueRange{p, indexConstant(ib, r * 2 * lanes)});
        ib.create<scf::YieldOp>(next);
      });
  sum.assign(loop.getResults().begin(), loop.getResults().end());
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
void UpdateLowering::emitValues(ArrayRef<Value> alpha, Value first, Value last, bool inPairs,
                                ValueStep step) {
  const int64_t dv = op.getValue().getType().getDimSize(3);
  int64_t split = std::gcd(dv, std::max<int64_t>(1, options.valueSplit));
  Value two = indexConstant(b, 2);
  // In pairs: the whole pairs of the keys, then an odd last key alone.
  Value begin = inPairs ? b.create<arith::DivUIOp>(first, two) : first;
  Value end = inPairs ? b.create<arith::DivUIOp>(last, two) : last;
  b.create<scf::ForOp>(
      indexConstant(b, 0), indexConstant(b, dv), indexConstant(b, split), std::nullopt,
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

// acc += P[j] V[key j], V widened to f32, for the columns `cols`.
SmallVector<Value> UpdateLowering::widenedValueStep(ImplicitLocOpBuilder& jb, Value j,
                                                    ValueRange acc, ArrayRef<Value> cols) {
  SmallVector<Value> p;
  for (int64_t r = 0; r < vectors; ++r)
    p.push_back(jb.create<vector::LoadOp>(vector, scores, ValueRange{j, column(r)}));
  Value key = keyAt(jb, j);
  SmallVector<Value> v;
  for (Value col : cols)
    v.push_back(loadF32(jb, op.getValue(), {op.getOffsets()[0], kvHead, key, col}));
  return rankOneUpdate(jb, p, v, acc);
}

// Keys 2j and 2j + 1 (`alone`: 2j only, its partner's V taken as 0, so that a value outside the
// keys attended, which may be anything past a padded length, never meets its P = 0). The block
// starts at a multiple of max_keys (a multiple of 32), so both lie in one chunk of V^T, side by
// side.
SmallVector<Value> UpdateLowering::pairValueStep(ImplicitLocOpBuilder& jb, Value j, ValueRange acc,
                                                 ArrayRef<Value> cols, Value probabilityPairs,
                                                 bool alone) {
  auto pairsType = VectorType::get({2 * lanes}, jb.getBF16Type());
  Value key = keyAt(jb, jb.create<arith::MulIOp>(j, indexConstant(jb, 2)));
  Value chunkKeys = indexConstant(jb, kValueChunkKeys);
  Value chunk = jb.create<arith::DivUIOp>(key, chunkKeys);
  Value inChunk = jb.create<arith::RemUIOp>(key, chunkKeys);
  SmallVector<Value> p, v;
  for (int64_t r = 0; r < vectors; ++r)
    p.push_back(jb.create<vector::LoadOp>(pairsType, probabilityPairs,
                                          ValueRange{j, indexConstant(jb, r * 2 * lanes)}));
  for (Value col : cols) {
    const SmallVector<Value> at{op.getOffsets()[0], kvHead, chunk, col, inChunk};
    v.push_back(alone ? loadBf16Alone(jb, paired->values, at)
                      : loadBf16Pair(jb, paired->values, at));
  }
  return pairDotUpdate(jb, p, v, acc);
}

// vcvtne2ps2bf16 rounds both to nearest even in one instruction (every target of paired
// products has AVX512-BF16; arith.truncf becomes integer ops, attn-lower-to-llvm expands bf16
// for CPUs without it), giving [even, odd] as halves; one vpermw interleaves them.
Value UpdateLowering::pairRows(ImplicitLocOpBuilder& ib, Value even, Value odd) {
  auto pairs = VectorType::get({2 * kTileRows}, ib.getBF16Type());
  auto noFastMath = LLVM::FastmathFlagsAttr::get(ib.getContext(), LLVM::FastmathFlags::none);
  Value halves = ib.create<LLVM::CallIntrinsicOp>(
                       pairs, ib.getStringAttr("llvm.x86.avx512bf16.cvtne2ps2bf16.512"),
                       ValueRange{odd, even}, noFastMath)
                     .getResult(0);
  SmallVector<int64_t> interleaved;
  for (int64_t l = 0; l < kTileRows; ++l)
    interleaved.append({l, kTileRows + l});
  return ib.create<vector::ShuffleOp>(halves, halves, interleaved);
}

Value UpdateLowering::emitZeroTiles() {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(taskStackBlock(op));
  const int64_t tileRows = kStepTiles * kStepTiles * kTileRows;
  Value zeros = b.create<memref::AllocaOp>(MemRefType::get({tileRows, kTileRows}, b.getF32Type()));
  b.setInsertionPointAfter(zeros.getDefiningOp());
  forRange(b, indexConstant(b, 0), indexConstant(b, tileRows),
           [&](ImplicitLocOpBuilder& rb, Value r) {
             rb.create<vector::StoreOp>(f32Splat(rb, kTileRows, 0), zeros,
                                        ValueRange{r, indexConstant(rb, 0)});
           });
  return zeros;
}

Value UpdateLowering::emitQueryPairs() {
  const int64_t dk = op.getKey().getType().getDimSize(3);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(taskStackBlock(op));
  Value pairs = b.create<memref::AllocaOp>(MemRefType::get({dk / 2, rows * 2}, b.getBF16Type()));
  // Once per task, before tile_keys' loop, when the packed query is filled before that loop.
  b.setInsertionPoint(op);
  if (auto keyLoop = op->getParentOfType<scf::ForOp>();
      keyLoop &&
      keyLoop->getParentOfType<scf::ForallOp>() == op->getParentOfType<scf::ForallOp>() &&
      !keyLoop->isAncestor(op.getQuery().getParentBlock()->getParentOp()))
    b.setInsertionPoint(keyLoop);
  forRange(
      b, indexConstant(b, 0), indexConstant(b, dk / 2), [&](ImplicitLocOpBuilder& pb, Value p) {
        Value even = pb.create<arith::MulIOp>(p, indexConstant(pb, 2));
        Value odd = pb.create<arith::AddIOp>(even, indexConstant(pb, 1));
        Value unscale = f32Splat(pb, lanes, 1.0 / scale);
        for (int64_t r = 0; r < vectors; ++r) {
          Value a = pb.create<arith::MulFOp>(
              pb.create<vector::LoadOp>(vector, op.getQuery(), ValueRange{even, column(r)}),
              unscale);
          Value c = pb.create<arith::MulFOp>(
              pb.create<vector::LoadOp>(vector, op.getQuery(), ValueRange{odd, column(r)}),
              unscale);
          pb.create<vector::StoreOp>(pairRows(pb, a, c), pairs,
                                     ValueRange{p, indexConstant(pb, r * 2 * lanes)});
        }
      });
  return pairs;
}

// Step 1 on tiles: S^T for the keys [keyBegin, keyCount) widened to whole steps of 32 (inside
// max_keys, a multiple of 32; K is zero past Tk). Each accumulator starts from a zero tile of
// its own in `zeros`: one tilezero for them all would be copied through memory (CSE merges
// them, and a tile both accumulates and stays zero).
void UpdateLowering::emitAmxScores(Value queryPairs, Value zeros) {
  const int64_t dk = op.getKey().getType().getDimSize(3);
  auto tileF32 = VectorType::get({kTileRows, kTileRows}, b.getF32Type());
  auto tileBf16 = VectorType::get({kTilePairs, kTileBf16}, b.getBF16Type());
  Value batch = op.getOffsets()[0], step = indexConstant(b, kStepTiles * kTileRows);
  Value begin = b.create<arith::MulIOp>(b.create<arith::DivUIOp>(keyBegin, step), step);
  Value end = b.create<arith::MulIOp>(b.create<arith::CeilDivUIOp>(keyCount, step), step);
  b.create<scf::ForOp>(
      begin, end, step, std::nullopt, [&](OpBuilder& nested, Location loc, Value j, ValueRange) {
        ImplicitLocOpBuilder ib(loc, nested);
        SmallVector<Value> first, keys;
        for (int64_t k = 0; k < kStepTiles; ++k) {
          first.push_back(ib.create<arith::AddIOp>(j, indexConstant(ib, k * kTileRows)));
          keys.push_back(keyAt(ib, first.back()));
        }
        for (int64_t row = 0; row < vectors; row += kStepTiles) {
          const int64_t count = std::min(kStepTiles, vectors - row);
          // acc[k * count + t]: keys of tile k by the query rows of tile row + t.
          SmallVector<Value> acc;
          for (int64_t a = 0; a < kStepTiles * count; ++a)
            acc.push_back(ib.create<amx::TileLoadOp>(
                tileF32, zeros, ValueRange{indexConstant(ib, a * kTileRows), column(0)}));
          acc = amxTileProducts(
              ib, acc, kStepTiles, count, dk / kTileBf16,
              [&](ImplicitLocOpBuilder& lb, int64_t c, int64_t k) -> Value {
                return lb.create<amx::TileLoadOp>(
                    tileBf16, paired->keys,
                    ValueRange{batch, kvHead, keys[k], indexConstant(lb, c * kTileBf16)});
              },
              [&](ImplicitLocOpBuilder& lb, int64_t c, int64_t t) -> Value {
                return lb.create<amx::TileLoadOp>(
                    tileBf16, queryPairs,
                    ValueRange{indexConstant(lb, c * kTilePairs),
                               indexConstant(lb, (row + t) * 2 * lanes)});
              });
          for (int64_t k = 0; k < kStepTiles; ++k)
            for (int64_t t = 0; t < count; ++t)
              ib.create<amx::TileStoreOp>(scores, ValueRange{first[k], column(row + t)},
                                          acc[k * count + t]);
        }
        ib.create<scf::YieldOp>();
      });
}

// Step 4 on tiles: acc *= alpha where a row's max moved, then O^T += V^T P^T (P^T's pairs from
// step 3) over the block's max_keys keys, a step of up to 2 x 2 tiles of acc at a time. A
// chunk of 32 keys not all attended reads V^T's zero chunk instead (a value outside the keys
// attended, which may be anything past a padded length, must not meet its P = 0: 0 x inf is
// NaN), and its attended keys are added after the tiles as dot products.
void UpdateLowering::emitAmxValues(ArrayRef<Value> alpha, Value pairs, Value rescale) {
  const int64_t dv = op.getValue().getType().getDimSize(3);
  const int64_t maxKeys = static_cast<int64_t>(*op.getMaxKeys());
  auto tileF32 = VectorType::get({kTileRows, kTileRows}, b.getF32Type());
  auto tileBf16 = VectorType::get({kTilePairs, kTileBf16}, b.getBF16Type());
  Value zero = indexConstant(b, 0), batch = op.getOffsets()[0];
  auto rescaling = b.create<scf::IfOp>(rescale, /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(rescaling.thenBlock()->getTerminator());
    forRange(b, zero, indexConstant(b, dv), [&](ImplicitLocOpBuilder& cb, Value c) {
      for (int64_t r = 0; r < vectors; ++r) {
        const SmallVector<Value> at{zero, zero, c, column(r)};
        Value a = cb.create<vector::LoadOp>(vector, op.getAcc(), at);
        cb.create<vector::StoreOp>(cb.create<arith::MulFOp>(a, alpha[r]), op.getAcc(), at);
      }
    });
  }
  Value chunkKeys = indexConstant(b, kValueChunkKeys);
  Value wholeBegin = b.create<arith::MulIOp>(b.create<arith::CeilDivUIOp>(keyBegin, chunkKeys),
                                             chunkKeys);
  Value zeroChunk = b.create<arith::SubIOp>(b.create<memref::DimOp>(paired->values, 2),
                                            indexConstant(b, 1));
  SmallVector<Value> chunks;
  for (int64_t k = 0; k < maxKeys; k += kValueChunkKeys) {
    Value whole = b.create<arith::AndIOp>(
        b.create<arith::CmpIOp>(arith::CmpIPredicate::ule, wholeBegin, indexConstant(b, k)),
        b.create<arith::CmpIOp>(arith::CmpIPredicate::ule, indexConstant(b, k + kValueChunkKeys),
                                keyCount));
    // The block starts at a multiple of max_keys, so its keys' chunks are whole.
    chunks.push_back(b.create<arith::SelectOp>(
        whole, b.create<arith::DivUIOp>(keyAt(b, indexConstant(b, k)), chunkKeys), zeroChunk));
  }
  for (int64_t c = 0; c < dv; c += kStepTiles * kTileRows) {
    const int64_t columnTiles = std::min(kStepTiles, (dv - c) / kTileRows);
    SmallVector<Value> columns;
    for (int64_t u = 0; u < columnTiles; ++u)
      columns.push_back(indexConstant(b, c + u * kTileRows));
    for (int64_t row = 0; row < vectors; row += kStepTiles) {
      const int64_t count = std::min(kStepTiles, vectors - row);
      // acc[u * count + t]: output columns of tile u by the query rows of tile row + t.
      SmallVector<Value> acc;
      for (int64_t u = 0; u < columnTiles; ++u)
        for (int64_t t = 0; t < count; ++t)
          acc.push_back(b.create<amx::TileLoadOp>(
              tileF32, op.getAcc(), ValueRange{zero, zero, columns[u], column(row + t)}));
      acc = amxTileProducts(
          b, acc, columnTiles, count, maxKeys / kValueChunkKeys,
          [&](ImplicitLocOpBuilder& lb, int64_t k, int64_t u) -> Value {
            return lb.create<amx::TileLoadOp>(
                tileBf16, paired->values, ValueRange{batch, kvHead, chunks[k], columns[u], zero});
          },
          [&](ImplicitLocOpBuilder& lb, int64_t k, int64_t t) -> Value {
            return lb.create<amx::TileLoadOp>(tileBf16, pairs,
                                              ValueRange{indexConstant(lb, k * kTilePairs),
                                                         indexConstant(lb, (row + t) * 2 * lanes)});
          });
      for (int64_t u = 0; u < columnTiles; ++u)
        for (int64_t t = 0; t < count; ++t)
          b.create<amx::TileStoreOp>(
              op.getAcc(), ValueRange{zero, zero, columns[u], column(row + t)}, acc[u * count + t]);
    }
  }
  // The attended keys of the chunks left out: before the first whole chunk, and from the last
  // whole chunk's end (or the first one's start) to keyCount.
  Value headEnd = b.create<arith::MinUIOp>(wholeBegin, keyCount);
  Value tailBegin = b.create<arith::MaxUIOp>(
      b.create<arith::MulIOp>(b.create<arith::DivUIOp>(keyCount, chunkKeys), chunkKeys),
      wholeBegin);
  for (auto [first, last] : {std::pair{keyBegin, headEnd}, std::pair{tailBegin, keyCount}}) {
    auto edge = b.create<scf::IfOp>(
        b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, first, last), /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(edge.thenBlock()->getTerminator());
    emitValues({}, first, last, /*inPairs=*/true,
               [&](ImplicitLocOpBuilder& jb, Value j, ValueRange acc, ArrayRef<Value> cols,
                   bool alone) { return pairValueStep(jb, j, acc, cols, pairs, alone); });
  }
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
  }
  Value maskModKeepsAll = placeKeys();
  products->scores();

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

// paired: K and V^T laid out for bf16 pair products (PairedOperands.h: AMX tiles or dot
// products, as options say), or null for f32 FMAs.
LogicalResult lowerUpdate(ImplicitLocOpBuilder& b, OnlineUpdateOp op, const VectorOptions& options,
                          const PairedOperands* paired) {
  return UpdateLowering(b, op, options, paired).emit();
}

} // namespace

LogicalResult lowerOnlineOpsToVectors(RewriterBase& rewriter, Operation* root,
                                      const VectorOptions& options) {
  SmallVector<Operation*> ops;
  root->walk([&](Operation* op) {
    if (isa<OnlineInitOp, PackQueryOp, OnlineUpdateOp, OnlineFinalizeOp>(op))
      ops.push_back(op);
  });
  // K and V laid out for paired products once per kernel and block size, whichever updates
  // read them.
  llvm::DenseMap<std::tuple<Value, Value, int64_t>, PairedOperands> laidOut;
  for (Operation* op : ops) {
    auto update = dyn_cast<OnlineUpdateOp>(op);
    std::optional<PairedOperands> paired;
    if (update && (options.amx || options.dot) && options.vectorWidth == kTileRows &&
        takesPairedProducts(update)) {
      const int64_t blockKeys = static_cast<int64_t>(*update.getMaxKeys());
      auto key = std::make_tuple(update.getKey(), update.getValue(), blockKeys);
      auto it = laidOut.find(key);
      if (it == laidOut.end())
        it = laidOut.try_emplace(key, layOutPairedOperands(rewriter, update, blockKeys)).first;
      paired = it->second;
    }
    rewriter.setInsertionPoint(op);
    ImplicitLocOpBuilder b(op->getLoc(), rewriter);
    if (auto init = dyn_cast<OnlineInitOp>(op))
      lowerInit(b, init);
    else if (auto pack = dyn_cast<PackQueryOp>(op))
      lowerPack(b, pack);
    else if (auto finalize = dyn_cast<OnlineFinalizeOp>(op))
      lowerFinalize(b, finalize);
    else if (failed(lowerUpdate(b, update, options, paired ? &*paired : nullptr)))
      return failure();
    rewriter.eraseOp(op);
  }
  return success();
}

} // namespace attnc::attn
