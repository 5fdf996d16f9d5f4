//===- MmaBackward.cpp - attn.backward as tensor-core kernels -----------------===//
//
// FlashAttention-2's backward on a GPU, deterministic by construction: each gradient element
// is written by one thread, from terms it adds in ascending order; no atomics. Two kernels on
// m16n8k16 MMAs (f16 or bf16 operands, f32 accumulators), 16 rows per warp:
//
//   the dQ kernel, a block per (`rows` query rows, batch, head) (but see a bias's gradient
//   below), as the forward's one-pass kernel: D_i = rowsum(dO ∘ O)_i (kept in workspace for the
//   next kernel), then for each block of `keyBlock` keys the masks can keep, K and V tiles in
//   shared memory:
//     S  = Q K^T,  x = scale S,  P = exp(terms(x) - lse)
//     dP = dO V^T                      dO's A fragments stay in registers, like Q's
//     G  = scale P (Z dP - D) score_grad(x)      (Z dropout's factor; the gradient of q.k)
//     dQ += G K                        G's C fragments are A fragments; K by ldmatrix.trans
//   the dK/dV kernel, a block per (`rows` keys, batch, KV head), K's and V's A fragments in
//   registers: for each head of the group and each block of `keyBlock` query rows whose kept
//   keys meet the block's, Q and dO tiles and the rows' lse and D in shared memory:
//     S^T = K Q^T, P^T = exp(terms(scale S^T) - lse)      (rows are keys, columns queries)
//     dV += (Z P)^T dO,  dP^T = V dO^T,  G^T as above,  dK += G^T Q
//
// Seven products of T^2 d in all (S and dP twice) against FlashAttention-2's five, which adds
// dQ with atomics: the price of determinism without per-block copies of dQ. With sinks, a task
// loop per head sums d sink_h = -sum_{b, i} exp(sink_h - lse_i) D_i in order.
//
// A score-shaped gradient (a bias's, aux_grad_direct: [B or 1, H or 1, Tq, Tk]) is summed in
// place by the dQ kernel, whose blocks then run over the gradient's own (b', h') and loop, in
// order, over the (b, h) that broadcast onto them: each block zeroes its rows of the gradient
// and adds dS_ij = p_ij (z_ij dP_ij - D_i) times score_mod's partial at each kept score. One
// block owns each element, and its adds are ordered by the barriers between key tiles. The
// price: a bias broadcast over both leaves ceil(Tq / rows) blocks, each running B H (b, h) in
// turn; and each add rounds to the gradient's type (as the CPU lowering's do).
//
// A table's gradient (the other aux_grads: many scores read each element) goes through
// copies (AuxCopies.h), one per warp of the dQ kernel, whose grid is then at most
// kTableBlocks blocks, each running its (query tile, pair) items in turn: a warp adds each C
// fragment element's terms in an order fixed by the data (WarpAdds.h: the lanes that read one
// element summed by shuffles, the first of them adding the sum), and a launch after the
// kernels sums the copies in order, a thread per element. The price: per fragment element and
// table read, 5 rounds of shuffles where the warp reads one element (slopes per head), else 32
// rounds; and min(items, 256) (rows / 16) copies of each table, items = ceil(Tq / rows) B H
// (B' H' with a bias).
//
//===---------------------------------------------------------------------------===//
#include "attn/Kit/Builders.h"
#include "attn/Kit/Elements.h"
#include "attn/Kit/OnlineState.h"
#include "attn/Transforms/AuxCopies.h"
#include "attn/Transforms/KeyRange.h"
#include "attn/Transforms/MmaFragments.h"
#include "attn/Transforms/Transforms.h"
#include "attn/Transforms/WarpAdds.h"
#include "bundle/MmaContract.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc::attn {
namespace {

// The most blocks of the dQ kernel with a table's gradient, so that the warps' copies (each a
// table's size) are bounded by the grid, not by the shape: 256 blocks of rows / 16 warps are
// about two resident blocks per SM of an H100 (132 SMs).
constexpr int64_t kTableBlocks = 256;

class BackwardMma : private MmaFragments {
public:
  BackwardMma(RewriterBase& rewriter, BackwardOp op, const BackwardTiles& tiles)
      : MmaFragments(rewriter, op,
                     {op.getQuery().getType().getElementType(),
                      op.getQuery().getType().getDimSize(3), op.getValue().getType().getDimSize(3),
                      tiles.rows, tiles.keyBlock, 1}),
        rewriter(rewriter), op(op), softmax(Exponential::Base2, 0) {}

  LogicalResult emit();

private:
  LogicalResult check();
  // A launch of `blocks` blocks (blockIndex), each of rows / 16 warps with two shared tiles of
  // `block` rows (widths d_k and d_v) and, with `rowStats`, two f32 vectors of `block`; the
  // builder at its body's start.
  gpu::LaunchOp launch(ImplicitLocOpBuilder& b, Value blocks, bool rowStats);
  // The (pair, tile) of work item `item` of pairs x tiles (item = pair tiles + tile, so a
  // pair's tiles run together and share their K/V or Q/dO rows in L2; gridDim.y would stop at
  // 65535 pairs): `tileIndex` and `pairIndex`.
  void placeItem(ImplicitLocOpBuilder& b, Value item, Value tiles) {
    tileIndex = b.create<arith::RemUIOp>(item, tiles);
    pairIndex = b.create<arith::DivUIOp>(item, tiles);
  }
  // The dQ kernel's work items, (query tile, pair) (queryPairs), and its blocks: a block per
  // item, or with a table's gradient at most kTableBlocks, each running its items in turn.
  struct QueryGrid {
    Value tiles, items, blocks;
  };
  QueryGrid queryGrid(ImplicitLocOpBuilder& b);
  // The dQ kernel: a block per (query tile, b, h), or with a direct gradient per (query tile,
  // b', h') of its extents, looping over the (b, h) that read it; with a table's gradient, at
  // most kTableBlocks blocks, each zeroing its warps' copies and then running its items.
  void emitQueryKernel(ImplicitLocOpBuilder& b);
  // One item of the dQ kernel (tileIndex, pairIndex).
  void emitQueryItem(ImplicitLocOpBuilder& b);
  // The dQ kernel's work for the block's `rows` query rows from `rowBase` of (batchIndex,
  // headIndex): D, then dQ over the kept keys (and the direct gradient's terms).
  void emitQueryRows(ImplicitLocOpBuilder& b, Value batchIndex, Value headIndex, Value rowBase);
  // The block's query rows below Tq: min(rows, Tq - rowBase).
  Value rowCount(ImplicitLocOpBuilder& b, Value rowBase) {
    return b.create<arith::MinUIOp>(c(b, rows), b.create<arith::SubIOp>(op.getSeqQ(), rowBase));
  }
  void emitKeyKernel(ImplicitLocOpBuilder& b);
  void emitSinkGradients(ImplicitLocOpBuilder& b);

  // D of this lane's C row r (myRows[r]): the quad's sum of dO ∘ O, stored once per row.
  Value rowDelta(ImplicitLocOpBuilder& b, int64_t r, Value row);
  // The keys [lo, hi) of [firstKey, endKey) that the masks keep for some of `count` rows
  // from `firstRow` of (batch, head) (KeyRange.h, on a copy of the op narrowed to them).
  std::pair<Value, Value> keptKeys(ImplicitLocOpBuilder& b, Value head, Value firstRow, Value count,
                                   Value firstKey, Value endKey);
  // Query tiles: dQ += G K over the key blocks of [lo, hi) (dQ's C fragments).
  SmallVector<Value> queryKeyLoop(ImplicitLocOpBuilder& b, Value lo, Value hi,
                                  ArrayRef<Value> gradFrags, Value lse, Value delta);
  // Key tiles: dK and dV over one query block from `firstRow` of `head` (their C fragments,
  // dK's then dV's).
  SmallVector<Value> keyQueryBlock(ImplicitLocOpBuilder& b, const ScoreTerms& rowTerms, Value head,
                                   Value firstRow, ValueRange acc);
  // The probabilities p and score gradients g of C fragments `s` (Q K^T or K Q^T) at query
  // positions `queryPos` and keys `keyPos`: z p (what weights dO or V) and g; also the raw
  // score x = scale s, whether it is masked, and p (z dp - D), the gradient by the modified
  // score (what an aux element's partial multiplies).
  struct Gradients {
    Value weighted, score, raw, masked, byModified;
  };
  Gradients gradients(ImplicitLocOpBuilder& b, const ScoreTerms& rowTerms, Value s, Value dp,
                      Value queryPos, Value keyPos, Value valid, Value lse, Value delta);
  // The op's score-shaped aux gradient (aux_grad_direct, a bias's), which the dQ kernel sums
  // in place, or null.
  Value directGradient();
  // The dQ kernel's blocks per query tile: (b, h), or (b', h') of the direct gradient's extents.
  std::pair<Value, Value> queryPairs(ImplicitLocOpBuilder& b);
  // Adds the aux_grad region's terms at C fragment `grads` (keys `keys`, those past the kept
  // range not `valid`) into the direct gradient and into this warp's copies of the tables'.
  void addAuxTerms(ImplicitLocOpBuilder& b, const Gradients& grads, Value keys, Value valid);
  // Zeroes rows [rowBase, rowBase + rows) of (gradBatch, gradHead) of the direct gradient, the
  // block's threads striding over them, then a barrier.
  void zeroDirectRows(ImplicitLocOpBuilder& b, Value rowBase);
  // grad[gradBatch, gradHead, myRows[r], key] += term at the lane's scores where `live`.
  void addDirectTerms(ImplicitLocOpBuilder& b, Value term, Value keys, Value live);
  // copies[warpCopy, element read] += term of aux_grads[k] at `indices` (C fragments, i32),
  // where `live`, each fragment element in turn.
  void addTableTerms(ImplicitLocOpBuilder& b, int64_t k, ArrayRef<Value> indices, Value term,
                     Value live);
  // Stores C fragments `acc` (8 columns each) as rows `rowsOf` of (batch, head) of `into`, the
  // rows below `end`.
  void storeRows(ImplicitLocOpBuilder& b, ArrayRef<Value> acc, Value into, Value head,
                 const Value rowsOf[2], Value end);

  RewriterBase& rewriter;
  BackwardOp op;
  // p = e^(s - lse) as 2^(s log2 e - lse log2 e) (ex2.approx): lse as the max, no shift.
  const OnlineState softmax;
  // Unit-stride views of the op's tensors, made before the launches.
  Value query, key, value, output, gradOutput, gradQuery, gradKey, gradValue;
  Value delta;                // [B, H, Tq] f32 workspace: D
  Value directGrad;           // the score-shaped aux gradient, or null
  std::optional<AuxCopies> tables; // the tables' gradients: a copy per warp of the dQ kernel
  Value warpCopy;                  // inside the dQ kernel: this warp's copy
  Value gradBatch, gradHead;  // inside the dQ kernel with directGrad: the block's (b', h')
  Value seqK;                 // Tk
  Value blockIndex, tileIndex, pairIndex; // inside a launch
  // Inside a launch: the tiles of d_k and d_v columns (K and V, or Q and dO) and the query
  // rows' lse and D (the dK/dV kernel).
  Value sharedA, sharedB, sharedLse, sharedDelta;
  // The dK/dV kernel's: V's A fragments, the lane's key indices (a C fragment, i32) and the
  // block's keys [tileFirst, tileEnd).
  SmallVector<Value> valueFrags;
  Value keyPositions, tileFirst, tileEnd;
};

LogicalResult BackwardMma::check() {
  auto fail = [&]() { return op.emitOpError() << "lower_backward_mma: "; };
  if (!element.isF16() && !element.isBF16())
    return fail() << "tensor cores take f16 or bf16 storage, not " << element;
  for (Value rows : {op.getKey(), op.getValue(), op.getOutput(), op.getGradOutput()})
    if (cast<MemRefType>(rows.getType()).getElementType() != element)
      return fail() << "k, v, o and grad_o must have q's element type " << element;
  if (dk % 16 != 0 || dv % 16 != 0)
    return fail() << "d_k = " << dk << " and d_v = " << dv << " must be multiples of 16";
  if (op.getAuxGradDirect() && op.getAuxGradDirect()->size() > 1)
    return fail() << "the dQ kernel's blocks sum one score-shaped gradient (aux_grad_direct) in "
                     "place, not "
                  << op.getAuxGradDirect()->size();
  if (rows <= 0 || rows % 16 != 0 || warps > 32)
    return fail() << "rows (" << rows << ") must be 16 per warp, at most 32 warps";
  if (block <= 0 || block % 16 != 0)
    return fail() << "key_block (" << block << ") must be a multiple of 16";
  const int64_t bytes = mmaSharedBytes(block, dk, dv, element.getIntOrFloatBitWidth() / 8,
                                       /*rowScales=*/true);
  if (bytes > kMmaSharedLimit)
    return fail() << "tiles of " << block << " rows need " << bytes << " bytes of shared memory; "
                  << "at most " << kMmaSharedLimit << " (a smaller key_block)";
  return success();
}

gpu::LaunchOp BackwardMma::launch(ImplicitLocOpBuilder& b, Value blocks, bool rowStats) {
  Value one = c(b, 1);
  auto launch = b.create<gpu::LaunchOp>(blocks, one, one, c(b, warps * kWarpSize), one, one);
  auto workgroup = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  auto tile = [&](int64_t width) {
    return launch.addWorkgroupAttribution(MemRefType::get({block, width + kMmaRowPad}, element,
                                                          MemRefLayoutAttrInterface(), workgroup),
                                          b.getLoc());
  };
  sharedA = tile(dk);
  sharedB = tile(dv);
  sharedLse = sharedDelta = Value();
  if (rowStats) {
    auto stats = MemRefType::get({block}, b.getF32Type(), MemRefLayoutAttrInterface(), workgroup);
    sharedLse = launch.addWorkgroupAttribution(stats, b.getLoc());
    sharedDelta = launch.addWorkgroupAttribution(stats, b.getLoc());
  }
  b.setInsertionPointToStart(&launch.getBody().front());
  b.create<gpu::TerminatorOp>();
  b.setInsertionPointToStart(&launch.getBody().front());
  blockIndex = launch.getBlockIds().x;
  emitLaneIds(b);
  lastRow = b.create<arith::SubIOp>(op.getSeqQ(), c(b, 1));
  lastKey = b.create<arith::SubIOp>(seqK, c(b, 1));
  cache.emplace(b, key, Value());
  sequenceEnd = Value();
  return launch;
}

Value BackwardMma::rowDelta(ImplicitLocOpBuilder& b, int64_t r, Value row) {
  auto pair = VectorType::get({2}, element);
  auto pairF32 = VectorType::get({2}, b.getF32Type());
  Value clamped = b.create<arith::MinUIOp>(myRows[r], lastRow);
  Value sum = splatConstant(b, pairF32, 0);
  for (int64_t n = 0; n < dv / 8; ++n) {
    Value column = b.create<arith::AddIOp>(b.create<arith::MulIOp>(t, c(b, 2)), c(b, 8 * n));
    const SmallVector<Value, 4> at{batch, head, clamped, column};
    Value o = b.create<vector::LoadOp>(pair, output, at);
    Value dO = b.create<vector::LoadOp>(pair, gradOutput, at);
    o = b.create<arith::ExtFOp>(pairF32, o);
    dO = b.create<arith::ExtFOp>(pairF32, dO);
    sum = b.create<vector::FMAOp>(o, dO, sum);
  }
  Value d = quadReduce(b,
                       b.create<arith::AddFOp>(b.create<vector::ExtractOp>(sum, 0),
                                               b.create<vector::ExtractOp>(sum, 1)),
                       /*max=*/false);
  Value store = b.create<arith::AndIOp>(
      b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, t, c(b, 0)),
      b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, myRows[r], op.getSeqQ()));
  auto ifStore = b.create<scf::IfOp>(store, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifStore.thenBlock());
  b.create<memref::StoreOp>(d, delta, ValueRange{batch, head, row});
  return d;
}

std::pair<Value, Value> BackwardMma::keptKeys(ImplicitLocOpBuilder& b, Value head, Value firstRow,
                                              Value count, Value firstKey, Value endKey) {
  // A marker of the domain, erased once read.
  BackwardOp narrowed =
      op.cloneOverDomain(b, {batch, head, firstRow, firstKey},
                         {c(b, 1), c(b, 1), count, b.create<arith::SubIOp>(endKey, firstKey)});
  std::pair<Value, Value> range = keptKeyRange(b, narrowed);
  narrowed->erase();
  return range;
}

BackwardMma::Gradients BackwardMma::gradients(ImplicitLocOpBuilder& b, const ScoreTerms& rowTerms,
                                              Value s, Value dp, Value queryPos, Value keyPos,
                                              Value valid, Value lse, Value rowDeltas) {
  Value scale = splatConstant(b, cType, op.getScale().convertToDouble());
  Value x = b.create<arith::MulFOp>(s, scale);
  Value kept = rowTerms.apply(b, x, queryPos, keyPos, ScoreTerms::MaskMod::Evaluate);
  Value minusInf = splatConstant(b, cType, -kInf);
  kept = b.create<arith::SelectOp>(valid, kept, minusInf);
  // p = exp(s - lse), 0 at a masked score (even in a row whose lse is -inf too).
  Value masked = b.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, kept, minusInf);
  Value p =
      b.create<arith::SelectOp>(masked, splatConstant(b, cType, 0),
                                softmax.probability(b, kept, softmax.probabilityOffset(b, lse)));
  Value weighted = rowTerms.dropout(b, p, queryPos, keyPos);
  // g = scale (z p dp - p D) score_grad(x)
  Value byModified = b.create<arith::SubFOp>(b.create<arith::MulFOp>(weighted, dp),
                                             b.create<arith::MulFOp>(p, rowDeltas));
  Value g = b.create<arith::MulFOp>(byModified, scale);
  // Masked and padding scores give 0, whatever the slope there (1 / (q - k + 1) is infinite
  // at a masked key: 0 inf would make the row NaN).
  if (Value slope = rowTerms.scoreGradient(b, x, queryPos, keyPos))
    g = b.create<arith::SelectOp>(masked, splatConstant(b, cType, 0),
                                  b.create<arith::MulFOp>(g, slope));
  return {weighted, g, x, masked, byModified};
}

Value BackwardMma::directGradient() {
  ArrayRef<int64_t> direct = op.getAuxGradDirect().value_or(ArrayRef<int64_t>{});
  return direct.empty() ? Value() : op.getAuxGrads()[direct.front()];
}

std::pair<Value, Value> BackwardMma::queryPairs(ImplicitLocOpBuilder& b) {
  if (directGrad)
    return {b.create<memref::DimOp>(directGrad, 0), b.create<memref::DimOp>(directGrad, 1)};
  return {b.create<memref::DimOp>(op.getQuery(), 0), c(b, op.getNumHeads())};
}

void BackwardMma::zeroDirectRows(ImplicitLocOpBuilder& b, Value rowBase) {
  Value elements = b.create<arith::MulIOp>(rowCount(b, rowBase), seqK);
  auto loop = b.create<scf::ForOp>(tid, elements, c(b, warps * kWarpSize));
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value e = loop.getInductionVar();
    Value row = b.create<arith::AddIOp>(rowBase, b.create<arith::DivUIOp>(e, seqK));
    storeF32(b, f32Constant(b, 0), directGrad,
             {gradBatch, gradHead, row, b.create<arith::RemUIOp>(e, seqK)});
  }
  waitAndSync(b, Value()); // the zeros before any thread's first add
}

void BackwardMma::addAuxTerms(ImplicitLocOpBuilder& b, const Gradients& grads, Value keys,
                              Value valid) {
  SmallVector<Value> reads = terms[0]->auxGradients(b, grads.raw, positions, keys);
  if (reads.empty())
    return; // score_mod reads none of them: the zeros stand
  auto i1Type = VectorType::get(cType.getShape(), b.getI1Type());
  auto below = [&](int64_t r) {
    return b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, myRows[r], op.getSeqQ());
  };
  Value live = b.create<arith::AndIOp>(
      b.create<arith::AndIOp>(valid, rowsVector(b, below(0), below(1), i1Type)),
      b.create<arith::XOrIOp>(grads.masked,
                              b.create<arith::ConstantOp>(DenseElementsAttr::get(i1Type, true))));
  // Each read yields its indices and d score_mod / d (the element read): the term is the
  // partial times dS. A direct gradient's reads all name the score's own element.
  Value directPartials;
  size_t next = 0;
  for (int64_t k : op.getAuxGradTargets().value_or(ArrayRef<int64_t>{})) {
    const int64_t rank = cast<MemRefType>(op.getAuxGrads()[k].getType()).getRank();
    ArrayRef<Value> indices = ArrayRef<Value>(reads).slice(next, rank);
    Value partial = reads[next + rank];
    next += rank + 1;
    if (tables->isTable(k))
      addTableTerms(b, k, indices, b.create<arith::MulFOp>(partial, grads.byModified), live);
    else
      directPartials = directPartials ? b.create<arith::AddFOp>(directPartials, partial) : partial;
  }
  if (directPartials)
    addDirectTerms(b, b.create<arith::MulFOp>(directPartials, grads.byModified), keys, live);
}

void BackwardMma::addDirectTerms(ImplicitLocOpBuilder& b, Value term, Value keys, Value live) {
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t column = 0; column < 2; ++column) {
      const SmallVector<int64_t, 2> at{r, column};
      auto ifLive = b.create<scf::IfOp>(b.create<vector::ExtractOp>(live, at),
                                        /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifLive.thenBlock());
      Value key =
          b.create<arith::IndexCastOp>(b.getIndexType(), b.create<vector::ExtractOp>(keys, at));
      const SmallVector<Value, 4> element{gradBatch, gradHead, myRows[r], key};
      Value sum = b.create<arith::AddFOp>(loadF32(b, directGrad, element),
                                          b.create<vector::ExtractOp>(term, at));
      storeF32(b, sum, directGrad, element);
    }
}

void BackwardMma::addTableTerms(ImplicitLocOpBuilder& b, int64_t k, ArrayRef<Value> indices,
                                Value term, Value live) {
  Value none = b.create<arith::ConstantIntOp>(-1, 64);
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t column = 0; column < 2; ++column) {
      const SmallVector<int64_t, 2> at{r, column};
      const SmallVector<Value> element = llvm::map_to_vector(
          indices, [&](Value index) { return b.create<vector::ExtractOp>(index, at).getResult(); });
      Value offset = b.create<arith::IndexCastOp>(b.getI64Type(), tables->offsetOf(b, k, element));
      offset = b.create<arith::SelectOp>(b.create<vector::ExtractOp>(live, at), offset, none);
      addInLaneOrder(b, lane, tables->copiesOf(k), warpCopy, offset,
                     b.create<vector::ExtractOp>(term, at));
    }
}

void BackwardMma::storeRows(ImplicitLocOpBuilder& b, ArrayRef<Value> acc, Value into,
                            Value intoHead, const Value rowsOf[2], Value end) {
  Type stored = cast<MemRefType>(into.getType()).getElementType();
  auto pair = VectorType::get({2}, stored);
  Value twoT = b.create<arith::MulIOp>(t, c(b, 2));
  for (int64_t r = 0; r < 2; ++r) {
    Value live = b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, rowsOf[r], end);
    auto ifLive = b.create<scf::IfOp>(live, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifLive.thenBlock());
    for (auto [n, fragment] : llvm::enumerate(acc)) {
      Value x = b.create<vector::ExtractOp>(fragment, r);
      if (stored != b.getF32Type())
        x = b.create<arith::TruncFOp>(pair, x);
      Value column = b.create<arith::AddIOp>(twoT, c(b, 8 * static_cast<int64_t>(n)));
      b.create<vector::StoreOp>(x, into, ValueRange{batch, intoHead, rowsOf[r], column});
    }
  }
}

BackwardMma::QueryGrid BackwardMma::queryGrid(ImplicitLocOpBuilder& b) {
  auto [pairBatches, pairHeads] = queryPairs(b);
  Value tiles = b.create<arith::CeilDivUIOp>(op.getSeqQ(), c(b, rows));
  Value items = b.create<arith::MulIOp>(tiles, b.create<arith::MulIOp>(pairBatches, pairHeads));
  Value blocks =
      tables->empty() ? items : b.create<arith::MinUIOp>(items, c(b, kTableBlocks)).getResult();
  return {tiles, items, blocks};
}

void BackwardMma::emitQueryKernel(ImplicitLocOpBuilder& b) {
  const QueryGrid grid = queryGrid(b);
  gpu::LaunchOp kernel = launch(b, grid.blocks, /*rowStats=*/false);
  if (tables->empty()) { // a block per item, no item loop: with one, the bias's dQ kernel
                         // spilled 272 bytes, not 164 (ptxas -v, sm_80, d 64)
    placeItem(b, blockIndex, grid.tiles);
    emitQueryItem(b);
    b.setInsertionPointAfter(kernel);
    return;
  }
  warpCopy = b.create<arith::AddIOp>(b.create<arith::MulIOp>(blockIndex, c(b, warps)),
                                     b.create<arith::DivUIOp>(tid, c(b, kWarpSize)));
  tables->zero(b, warpCopy, lane, c(b, kWarpSize));
  syncWarp(b); // the zeros before any lane's first add
  // The block's items in order, so that its warps' copies are sums in a fixed order.
  auto items = b.create<scf::ForOp>(blockIndex, grid.items, grid.blocks);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(items.getBody());
    placeItem(b, items.getInductionVar(), grid.tiles);
    emitQueryItem(b);
  }
  b.setInsertionPointAfter(kernel);
  warpCopy = Value();
}

void BackwardMma::emitQueryItem(ImplicitLocOpBuilder& b) {
  Value batches = b.create<memref::DimOp>(query, 0);
  Value heads = c(b, op.getNumHeads());
  auto [pairBatches, pairHeads] = queryPairs(b);
  Value rowBase = b.create<arith::MulIOp>(tileIndex, c(b, rows));
  Value pairBatch = b.create<arith::DivUIOp>(pairIndex, pairHeads);
  Value pairHead = b.create<arith::RemUIOp>(pairIndex, pairHeads);
  if (!directGrad) {
    emitQueryRows(b, pairBatch, pairHead, rowBase);
    return;
  }
  gradBatch = pairBatch;
  gradHead = pairHead;
  zeroDirectRows(b, rowBase);
  // The gradient's extents are 1 or whole, so b = b' + i B' and h = h' + j H' run over every
  // (b, h) that reads (b', h'), in order.
  forRange(b, c(b, 0), b.create<arith::DivUIOp>(batches, pairBatches),
           [&](ImplicitLocOpBuilder& bb, Value i) {
             Value batchIndex =
                 bb.create<arith::AddIOp>(pairBatch, bb.create<arith::MulIOp>(i, pairBatches));
             forRange(bb, c(bb, 0), bb.create<arith::DivUIOp>(heads, pairHeads),
                      [&](ImplicitLocOpBuilder& hb, Value j) {
                        emitQueryRows(hb, batchIndex,
                                      hb.create<arith::AddIOp>(
                                          pairHead, hb.create<arith::MulIOp>(j, pairHeads)),
                                      rowBase);
                      });
           });
}

void BackwardMma::emitQueryRows(ImplicitLocOpBuilder& b, Value batchIndex, Value headIndex,
                                Value rowBase) {
  Value seqQ = op.getSeqQ();
  batch = batchIndex;
  head = headIndex;
  kvHead = ScoreTerms::kvHeadOf(b, op, head);
  emitRows(b, rowBase);
  Value off = ScoreTerms::positionOffset(b, op);
  positions = rowsVector(b, i32(b, b.create<arith::AddIOp>(myRows[0], off)),
                         i32(b, b.create<arith::AddIOp>(myRows[1], off)), cTypeI32);
  emitQueryFragments(b, query);
  SmallVector<Value> gradFrags = rowFragments(b, gradOutput, myHeads, myRows, lastRow, dv);
  Value lse[2], deltas[2];
  for (int64_t r = 0; r < 2; ++r) {
    lse[r] = b.create<memref::LoadOp>(
        op.getLse(), ValueRange{batch, head, b.create<arith::MinUIOp>(myRows[r], lastRow)});
    deltas[r] = rowDelta(b, r, myRows[r]);
  }
  auto [lo, hi] = keptKeys(b, head, rowBase, rowCount(b, rowBase), c(b, 0), seqK);
  SmallVector<Value> dq = queryKeyLoop(b, lo, hi, gradFrags, rowsVector(b, lse[0], lse[1], cType),
                                       rowsVector(b, deltas[0], deltas[1], cType));
  storeRows(b, dq, gradQuery, head, myRows, seqQ);
}

SmallVector<Value> BackwardMma::queryKeyLoop(ImplicitLocOpBuilder& b, Value lo, Value hi,
                                             ArrayRef<Value> gradFrags, Value lse,
                                             Value rowDeltas) {
  SmallVector<Value> zeros(dk / 8, splatConstant(b, cType, 0));
  auto loop = b.create<scf::ForOp>(lo, hi, c(b, block), zeros);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value keyBlock = loop.getInductionVar();
  copyTile(b, key, sharedA, dk, keyBlock, hi);
  waitAndSync(b, copyTile(b, value, sharedB, dv, keyBlock, hi));
  SmallVector<Value> s = rowProducts(b, queryFrags, sharedA, dk);
  SmallVector<Value> dp = rowProducts(b, gradFrags, sharedB, dv);
  Value end = b.create<vector::BroadcastOp>(cTypeI32, i32(b, hi));
  for (int64_t j = 0; j < block / 8; ++j) {
    Value keys = fragmentKeys(b, keyBase(b, keyBlock, j));
    Value valid = b.create<arith::CmpIOp>(arith::CmpIPredicate::slt, keys, end);
    Gradients step = gradients(b, *terms[0], s[j], dp[j], positions, keys, valid, lse, rowDeltas);
    addAuxTerms(b, step, keys, valid);
    s[j] = step.score;
  }
  SmallVector<Value> dq(loop.getRegionIterArgs());
  accumulateProducts(b, s, sharedA, dk, dq);
  waitAndSync(b, Value()); // every warp is done with the tiles the next copies overwrite
  b.create<scf::YieldOp>(dq);
  return loop.getResults();
}

void BackwardMma::emitKeyKernel(ImplicitLocOpBuilder& b) {
  const int64_t kvHeads = op.getKey().getType().getDimSize(1);
  const int64_t group = static_cast<int64_t>(op.getNumHeads()) / kvHeads;
  Value pairs = b.create<arith::MulIOp>(b.create<memref::DimOp>(query, 0), c(b, kvHeads));
  Value tiles = b.create<arith::CeilDivUIOp>(seqK, c(b, rows));
  gpu::LaunchOp kernel = launch(b, b.create<arith::MulIOp>(pairs, tiles), /*rowStats=*/true);
  placeItem(b, blockIndex, tiles);
  batch = b.create<arith::DivUIOp>(pairIndex, c(b, kvHeads));
  kvHead = b.create<arith::RemUIOp>(pairIndex, c(b, kvHeads));
  Value keyBase0 = b.create<arith::MulIOp>(tileIndex, c(b, rows));
  Value warpRow = b.create<arith::MulIOp>(b.create<arith::DivUIOp>(tid, c(b, kWarpSize)), c(b, 16));
  Value myKeys[2];
  myKeys[0] = b.create<arith::AddIOp>(b.create<arith::AddIOp>(keyBase0, warpRow), g);
  myKeys[1] = b.create<arith::AddIOp>(myKeys[0], c(b, 8));
  const Value keyHeads[2] = {kvHead, kvHead};
  queryFrags = rowFragments(b, key, keyHeads, myKeys, lastKey, dk); // K's, as the A operand
  valueFrags = rowFragments(b, value, keyHeads, myKeys, lastKey, dv);
  keyPositions = rowsVector(b, i32(b, myKeys[0]), i32(b, myKeys[1]), cTypeI32);
  tileEnd = b.create<arith::MinUIOp>(b.create<arith::AddIOp>(keyBase0, c(b, rows)), seqK);
  tileFirst = keyBase0;
  SmallVector<Value> acc(dk / 8 + dv / 8, splatConstant(b, cType, 0));
  Value firstHead = b.create<arith::MulIOp>(kvHead, c(b, group));
  auto heads = b.create<scf::ForOp>(firstHead, b.create<arith::AddIOp>(firstHead, c(b, group)),
                                    c(b, 1), acc);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(heads.getBody());
    Value h = heads.getInductionVar();
    const ScoreTerms rowTerms(b, op, batch, h);
    auto blocks =
        b.create<scf::ForOp>(c(b, 0), op.getSeqQ(), c(b, block), heads.getRegionIterArgs());
    b.setInsertionPointToStart(blocks.getBody());
    b.create<scf::YieldOp>(
        keyQueryBlock(b, rowTerms, h, blocks.getInductionVar(), blocks.getRegionIterArgs()));
    b.setInsertionPointAfter(blocks);
    b.create<scf::YieldOp>(blocks.getResults());
  }
  const SmallVector<Value> results(heads.getResults());
  storeRows(b, ArrayRef(results).take_front(dk / 8), gradKey, kvHead, myKeys, seqK);
  storeRows(b, ArrayRef(results).drop_front(dk / 8), gradValue, kvHead, myKeys, seqK);
  b.setInsertionPointAfter(kernel);
}

SmallVector<Value> BackwardMma::keyQueryBlock(ImplicitLocOpBuilder& b, const ScoreTerms& rowTerms,
                                              Value h, Value firstRow, ValueRange acc) {
  Value rowEnd =
      b.create<arith::MinUIOp>(b.create<arith::AddIOp>(firstRow, c(b, block)), op.getSeqQ());
  auto [lo, hi] =
      keptKeys(b, h, firstRow, b.create<arith::SubIOp>(rowEnd, firstRow), tileFirst, tileEnd);
  auto ifAny = b.create<scf::IfOp>(TypeRange(acc),
                                   b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, lo, hi),
                                   /*addThenBlock=*/true, /*addElseBlock=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifAny.elseBlock());
  b.create<scf::YieldOp>(acc);
  b.setInsertionPointToStart(ifAny.thenBlock());
  copyRows(b, query, sharedA, dk, h, firstRow, rowEnd, lastRow);
  Value copies = copyRows(b, gradOutput, sharedB, dv, h, firstRow, rowEnd, lastRow);
  // The rows' lse and D (rows past Tq repeat the last: their scores are masked).
  const int64_t threads = warps * kWarpSize;
  for (int64_t i = 0; i < (block + threads - 1) / threads; ++i) {
    Value index = b.create<arith::AddIOp>(tid, c(b, i * threads));
    auto ifInside =
        b.create<scf::IfOp>(b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, index, c(b, block)),
                            /*withElseRegion=*/false);
    OpBuilder::InsertionGuard inside(b);
    b.setInsertionPointToStart(ifInside.thenBlock());
    Value row = b.create<arith::MinUIOp>(b.create<arith::AddIOp>(firstRow, index), lastRow);
    const SmallVector<Value, 3> at{batch, h, row};
    b.create<memref::StoreOp>(b.create<memref::LoadOp>(op.getLse(), at), sharedLse, index);
    b.create<memref::StoreOp>(b.create<memref::LoadOp>(delta, at), sharedDelta, index);
  }
  waitAndSync(b, copies);
  SmallVector<Value> scores = rowProducts(b, queryFrags, sharedA, dk);
  SmallVector<Value> dp = rowProducts(b, valueFrags, sharedB, dv);
  Value off = b.create<vector::BroadcastOp>(cTypeI32, i32(b, ScoreTerms::positionOffset(b, op)));
  Value end = b.create<vector::BroadcastOp>(cTypeI32, i32(b, rowEnd));
  SmallVector<Value> weighted;
  for (int64_t j = 0; j < block / 8; ++j) {
    Value rowsOfColumns = fragmentKeys(b, keyBase(b, firstRow, j));
    Value valid = b.create<arith::CmpIOp>(arith::CmpIPredicate::slt, rowsOfColumns, end);
    Gradients step = gradients(b, rowTerms, scores[j], dp[j],
                               b.create<arith::AddIOp>(rowsOfColumns, off), keyPositions, valid,
                               fragmentScales(b, sharedLse, j), fragmentScales(b, sharedDelta, j));
    weighted.push_back(step.weighted);
    scores[j] = step.score;
  }
  SmallVector<Value> gradKeys(acc.take_front(dk / 8)), gradValues(acc.drop_front(dk / 8));
  accumulateProducts(b, weighted, sharedB, dv, gradValues);
  accumulateProducts(b, scores, sharedA, dk, gradKeys);
  waitAndSync(b, Value()); // every warp is done with the tiles the next copies overwrite
  gradKeys.append(gradValues);
  b.create<scf::YieldOp>(gradKeys);
  return ifAny.getResults();
}

void BackwardMma::emitSinkGradients(ImplicitLocOpBuilder& b) {
  // A task per head: grad_sinks[h] = -sum_b sum_i w_bi D_bi, w = exp(sink - lse) (0 for a -inf
  // sink), in order.
  Value batches = b.create<memref::DimOp>(query, 0);
  Value heads = unfoldedTaskCount(b, c(b, op.getNumHeads()), batches);
  auto forall = b.create<scf::ForallOp>(ArrayRef<OpFoldResult>{heads}, ValueRange{}, std::nullopt);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(forall.getBody());
  Value h = forall.getInductionVar(0);
  Value sink = b.create<memref::LoadOp>(op.getSinks(), h);
  Value none = b.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, sink, f32Constant(b, -kInf));
  auto rowsOf = [&](ImplicitLocOpBuilder& bb, Value batchIndex, ValueRange outer) {
    return foldRange(
        bb, c(bb, 0), op.getSeqQ(), outer, [&](ImplicitLocOpBuilder& rb, Value i, ValueRange acc) {
          const SmallVector<Value, 3> at{batchIndex, h, i};
          Value lse = rb.create<memref::LoadOp>(op.getLse(), at);
          Value w = rb.create<arith::SelectOp>(
              none, f32Constant(rb, 0),
              softmax.probability(rb, sink, softmax.probabilityOffset(rb, lse)));
          Value term = rb.create<arith::MulFOp>(w, rb.create<memref::LoadOp>(delta, at));
          return SmallVector<Value>{rb.create<arith::AddFOp>(acc[0], term)};
        });
  };
  Value sum = foldRange(b, c(b, 0), batches, {f32Constant(b, 0)}, rowsOf).front();
  b.create<memref::StoreOp>(b.create<arith::NegFOp>(sum), op.getGradSinks(), h);
}

LogicalResult BackwardMma::emit() {
  if (failed(check()))
    return failure();
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  b.setInsertionPoint(op);
  recordAlignedArguments(b, op->getParentOfType<ModuleOp>(), kMmaBackwardAlignedArgsSymbol,
                         {op.getQuery(), op.getKey(), op.getValue(), op.getOutput(),
                          op.getGradOutput(), op.getGradQuery(), op.getGradKey(),
                          op.getGradValue()});
  // Views with a static unit innermost stride, which cp.async and the pair loads and stores
  // need; the bundle's entry checks at run time that the tensors have one (MmaContract.h).
  auto view = [&](Value tensor) { return unitInnerStrideView(b, tensor).first; };
  query = view(op.getQuery());
  key = view(op.getKey());
  value = view(op.getValue());
  output = view(op.getOutput());
  gradOutput = view(op.getGradOutput());
  gradQuery = view(op.getGradQuery());
  gradKey = view(op.getGradKey());
  gradValue = view(op.getGradValue());
  seqK = b.create<memref::DimOp>(op.getKey(), 2);
  directGrad = directGradient();
  tables.emplace(op);
  {
    // Before the block's first phase, as every workspace (RoPE's rotations may come first).
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(firstPhase(*op->getBlock()));
    delta = b.create<memref::AllocOp>(
        MemRefType::get(
            {ShapedType::kDynamic, static_cast<int64_t>(op.getNumHeads()), ShapedType::kDynamic},
            b.getF32Type()),
        ValueRange{b.create<memref::DimOp>(op.getQuery(), 0), op.getSeqQ()});
    if (!tables->empty())
      tables->allocate(b, b.create<arith::MulIOp>(queryGrid(b).blocks, c(b, warps)));
  }
  emitQueryKernel(b);
  emitKeyKernel(b);
  tables->sumInOrder(b, /*perTask=*/1); // a thread per element
  if (op.getSinks())
    emitSinkGradients(b);
  b.create<memref::DeallocOp>(delta);
  op->getParentOfType<func::FuncOp>()->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  rewriter.eraseOp(op);
  return success();
}

} // namespace

LogicalResult lowerBackwardToMma(RewriterBase& rewriter, BackwardOp op,
                                 const BackwardTiles& tiles) {
  return BackwardMma(rewriter, op, tiles).emit();
}

} // namespace attnc::attn
