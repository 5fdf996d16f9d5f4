//===- UpdateLowering.h - the CPU prefill's update, from one tile --------------===//
//
// UpdateLowering lowers one tile's online_update to vector code (LowerUpdate.cpp: the steps and
// the register tiles of FMAs on widened values; UpdatePairs.cpp: the bf16 pair products, as
// AVX512-BF16 dot products or on AMX tiles; UpdateAdditive.cpp: Bahdanau's score), with the way
// of multiplying an UpdateProducts.
// Private to those files.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMS_UPDATELOWERING_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMS_UPDATELOWERING_H

#include "attn/IR/AttnOps.h"
#include "attn/Kit/Builders.h"
#include "attn/Kit/OnlineState.h"
#include "attn/Transforms/ExpressionBounds.h"
#include "attn/Transforms/PairedOperands.h"
#include "attn/Transforms/ScoreTerms.h"
#include "attn/Transforms/Transforms.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <limits>
#include <memory>
#include <optional>

namespace attnc::attn::prefill {

// The two files of the update write MLIR's names unqualified, as every lowering does.
using namespace mlir;

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

class UpdateProducts;

class UpdateLowering {
public:
  // paired: the laid-out K and V^T when the products take bf16 pairs (options.amx picks tiles
  // over dot products), else null; additiveKeys: an additive score's key exponentials
  // (AdditiveKeys.h), else null.
  UpdateLowering(ImplicitLocOpBuilder& b, OnlineUpdateOp op, const VectorOptions& options,
                 const PairedOperands* paired, Value additiveKeys);
  ~UpdateLowering();

  LogicalResult emit();

private:
  friend class WidenedProducts;
  friend class AdditiveProducts;
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
  // group a register tile over `steps` steps from `start` (an f32 in every element; null: 0).
  void emitScoresInGroups(int64_t steps, ScoreStep step, Value start = nullptr);
  void emitScores(Value begin, Value end, int64_t unroll, int64_t steps, ScoreStep step,
                  Value start);
  SmallVector<Value> widenedScoreStep(ImplicitLocOpBuilder& cb, Value c, ValueRange acc,
                                      ArrayRef<Value> keys);
  // The additive score (UpdateAdditive.cpp, AdditiveKeys.h). The query tile's exponentials
  // E(q^T) and the steps' weights -2 w_c on the task's stack, whether its rows and weights are
  // within their bounds, and sum_c w_c, formed once per task before the key loop.
  struct HiddenRows {
    Value exponentials, stepWeights, inBound, weightSum;
  };
  HiddenRows emitHiddenRows();
  // S through exponentials where the tile's rows and the block's keys are within the bound,
  // else through tanh.
  void emitAdditiveScores(const HiddenRows& hidden);
  // Step c through tanh: w_c tanh(q_c's rows + k_c of each key).
  SmallVector<Value> tanhScoreStep(ImplicitLocOpBuilder& cb, Value c, ValueRange acc,
                                   ArrayRef<Value> keys);
  // Step c through exponentials, from sum_c w_c: -2 w_c / (E(q_c) E(k_c) + 1).
  SmallVector<Value> exponentialScoreStep(ImplicitLocOpBuilder& cb, Value c, ValueRange acc,
                                          ArrayRef<Value> keys, const HiddenRows& hidden);
  // Where code that runs once per task goes: before tile_keys' loop when the packed query is
  // filled before that loop, else before the update.
  Operation* beforeKeyLoop();
  SmallVector<Value> pairScoreStep(ImplicitLocOpBuilder& cb, Value c, ValueRange acc,
                                   ArrayRef<Value> keys, Value queryPairs);
  // maskModKeepsAll: null, or an i1 that picks the step's copy without the mask_mod region.
  void emitMaskAndMax(SmallVector<Value>& max, Value maskModKeepsAll);
  SmallVector<Value> maskAndMax(ImplicitLocOpBuilder& ob, ValueRange max,
                                ScoreTerms::MaskMod maskMod);
  // scorePatches: per aux operand read at every score (ScoreTerms::scoreShapedAux: a bias), a
  // [max_keys, rows] f32 buffer on the task's stack where the update's tile is one head's
  // rows, else null; readScorePatches fills them with the block's elements (ScorePatch.h).
  SmallVector<Value> allocateScorePatches();
  void readScorePatches();
  void emitExpAndSum(ArrayRef<Value> offsets, SmallVector<Value>& sum);
  // A step over keys of PV for the columns `cols`: key j, or with `inPairs` the pair j (keys
  // 2j and 2j + 1, `alone`: 2j only); the accumulators after it.
  using ValueStep = function_ref<SmallVector<Value>(ImplicitLocOpBuilder&, Value j, ValueRange acc,
                                                    ArrayRef<Value> cols, bool alone)>;
  // acc = alpha acc (no scaling for an empty alpha) + P^T V over the keys [first, last) (first
  // even in pairs, and an odd last key alone).
  void emitValues(ImplicitLocOpBuilder& vb, ArrayRef<Value> alpha, Value first, Value last,
                  bool inPairs, ValueStep step);
  // emitValues over the task's keys in widened steps, V read through a view of unit column
  // stride where its columns are contiguous at run time.
  void emitWidenedValues(ArrayRef<Value> alpha);
  SmallVector<Value> widenedValueStep(ImplicitLocOpBuilder& jb, Value rows, Value j, ValueRange acc,
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

  ImplicitLocOpBuilder& b;
  OnlineUpdateOp op;
  const VectorOptions& options;
  const PairedOperands* paired;
  const Value additiveKeys;                       // [B, H, d + 1, Tk'] (AdditiveKeys.h), or null
  const std::unique_ptr<UpdateProducts> products; // chosen once, in the constructor
  const double scale; // the softmax scale, which the packed query carries
  const OnlineState softmax;
  const int64_t lanes, rows, vectors;
  VectorType vector, vectorI32;
  Value scores;                    // S: [max_keys, rows] f32 on the task's stack
  SmallVector<Value> scorePatches; // allocateScorePatches'
  Value kvHead;     // h / (H / H_kv)
  Value keyHead;    // the key rows' head: kvHead, or h for additive keys
  Value keyBegin;   // the first key the update attends (a multiple of the live chunk)
  Value keyCount;   // the end of the keys it attends, at most nj
  Value positions0; // i0 + off + lane, the key positions of the first vector's rows (i32)
  std::optional<ScoreTerms> terms;
};

// One way of multiplying of the update (Kit/Products.h holds the instructions), chosen once per
// kernel: the steps that multiply (1: S = Q K^T; 2: S's scale; 3: P in the form step 4 reads;
// 4: acc += P^T V) ask it, and no emit method asks which kind it is.
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
class WidenedProducts : public UpdateProducts {
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
  void values(ArrayRef<Value> alpha, Value) override { u.emitWidenedValues(alpha); }
};

// Bahdanau's additive score (the op's score_weights) on widened values: S's register tiles of
// weighted tanh over the hidden dims (through exponentials, AdditiveKeys.h), then P and P V as
// WidenedProducts forms them.
class AdditiveProducts final : public WidenedProducts {
public:
  using WidenedProducts::WidenedProducts;
  void prepare() override { hidden = u.emitHiddenRows(); }
  void scores() override { u.emitAdditiveScores(hidden); }

private:
  UpdateLowering::HiddenRows hidden;
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
        u.b, alpha, u.keyBegin, u.keyCount, /*inPairs=*/true,
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

} // namespace attnc::attn::prefill

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_UPDATELOWERING_H
