//===- LowerToMma.cpp - query tiles as tensor-core flash attention on a GPU --===//
//
// One GPU block runs one task: a (batch, head, query tile) of 16 W rows, with W warps; warp w
// owns rows 16w .. 16w + 15 of the tile. Per key block of Bc keys, with m16n8k16 MMAs (f16 or
// bf16 operands, f32 accumulators):
//
//   S  = Q K^T                 Q's A fragments stay in registers for the whole task; K's B
//                              fragments come from shared memory by ldmatrix
//   S  = terms(scale * S)      softcap, ALiBi, bias, masks (ScoreTerms); keys past the block
//                              -inf
//   m' = max(m, rowmax S)      each row's max is reduced over the 4 lanes that hold it (two
//                              xor shuffles)
//   P  = exp(S - m')           l = exp(m - m') l + rowsum P, as per-lane partial sums reduced
//                              once at the end
//   O  = exp(m - m') O + P V   P's C fragments are A fragments as they are (no shared memory);
//                              V's B fragments come by ldmatrix.trans
//
// Decoding (few tasks, many keys) splits each task's keys over several blocks when the
// options allow: the launch has blocks (tasks, splits), each writes its unnormalised
// (acc, m, l) to a workspace, and a second launch merges them per row:
//   M = max_s m_s, L = sum_s exp(m_s - M) l_s, O = sum_s exp(m_s - M) acc_s / L.
// The split count is chosen at run time, ceil(fill_blocks / tasks) capped by max_key_splits
// and the number of key blocks; with one split the single-pass kernel runs.
//
// K and V tiles reach shared memory by cp.async: V_j loads while S_j is computed and K_{j+1}
// while P_j V_j is. Their rows are padded by 8 elements (16 bytes), so the 8 row addresses of
// an ldmatrix fall in different banks.
//
// Fragment layouts (PTX ISA, mma.m16n8k16), for lane = 4 g + t:
//   C (16 x 8, vector<2x2xf32>):  [r][c] = row g + 8 r, column 2 t + c
//   A (16 x 16, vector<4x2>):     [0] row g, k 2t..2t+1; [1] row g + 8; [2] row g, k 8 + 2t..;
//                                 [3] row g + 8, k 8 + 2t..
//   B (16 x 8, vector<2x2>):      [0] k 2t..2t+1, column g; [1] k 8 + 2t.., column g
// so the C fragments of key tiles 2i and 2i + 1 are, row by row, the A fragment of P's key
// step i.
//
//===---------------------------------------------------------------------------===//
#include "Semantics/OnlineSoftmax.h"
#include "attn/Transforms/LoweringUtils.h"
#include "attn/Transforms/ScoreTerms.h"
#include "bundle/MmaContract.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"

#include <limits>

using namespace mlir;

namespace attnc::attn {
namespace {

constexpr int64_t kWarpSize = 32;
constexpr int64_t kChunk = 8; // elements per cp.async (16 bytes of f16 or bf16)
constexpr double kLog2e = 1.4426950408889634;
constexpr double kInf = std::numeric_limits<double>::infinity();

// The ops of one task that the lowering replaces.
struct TaskOps {
  OnlineInitOp init;
  scf::ForOp keys; // the key-block loop, holding `update`
  OnlineUpdateOp update;
  OnlineFinalizeOp finalize;
};

FailureOr<TaskOps> matchTask(scf::ForallOp tasks) {
  TaskOps ops;
  if (tasks.getRank() != 1 || !tasks.getOutputs().empty())
    return tasks.emitOpError() << "lower_to_mma needs a 1-d scf.forall of tasks (tile_queries)";
  for (Operation& op : tasks.getBody()->without_terminator()) {
    if (auto init = dyn_cast<OnlineInitOp>(op))
      ops.init = init;
    else if (auto finalize = dyn_cast<OnlineFinalizeOp>(op))
      ops.finalize = finalize;
    else if (auto loop = dyn_cast<scf::ForOp>(op))
      loop.walk([&](OnlineUpdateOp update) {
        ops.keys = loop;
        ops.update = update;
      });
    else if (isa<PackQueryOp>(op))
      return op.emitOpError() << "lower_to_mma reads the query itself: do not pack it";
  }
  if (!ops.init || !ops.finalize || !ops.update || ops.update->getParentOp() != ops.keys)
    return tasks.emitOpError() << "lower_to_mma needs a task of online_init, an scf.for of "
                                  "online_update (tile_keys) and online_finalize";
  return ops;
}

// `memref` viewed with a static unit innermost stride, which cp.async and vector loads need.
// The bundle's entry checks at run time that the tensors have one (MmaContract.h).
Value unitStrideView(ImplicitLocOpBuilder& b, Value memref) {
  auto type = cast<MemRefType>(memref.getType());
  const int64_t rank = type.getRank();
  auto meta = b.create<memref::ExtractStridedMetadataOp>(memref);
  SmallVector<OpFoldResult> sizes, strides;
  SmallVector<int64_t> layout(rank, ShapedType::kDynamic);
  layout.back() = 1;
  for (int64_t i = 0; i < rank; ++i) {
    sizes.push_back(type.isDynamicDim(i) ? OpFoldResult(meta.getSizes()[i])
                                         : OpFoldResult(b.getIndexAttr(type.getDimSize(i))));
    strides.push_back(i + 1 < rank ? OpFoldResult(meta.getStrides()[i])
                                   : OpFoldResult(b.getIndexAttr(1)));
  }
  auto viewType =
      MemRefType::get(type.getShape(), type.getElementType(),
                      StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, layout));
  return b.create<memref::ReinterpretCastOp>(viewType, memref, OpFoldResult(meta.getOffset()),
                                             sizes, strides);
}

// The function argument a tensor comes from (through bshd's memref.transpose), or -1.
int64_t argumentIndex(Value memref) {
  while (auto transpose = memref.getDefiningOp<memref::TransposeOp>())
    memref = transpose.getIn();
  auto argument = dyn_cast<BlockArgument>(memref);
  return argument && isa<func::FuncOp>(argument.getOwner()->getParentOp()) ? argument.getArgNumber()
                                                                           : -1;
}

// Which kernel a launch runs: the whole task, one key split of it, or the merge of the splits.
enum class Phase { Whole, Partial, Combine };

class MmaLowering {
public:
  MmaLowering(RewriterBase& rewriter, scf::ForallOp tasks, const TaskOps& ops,
              const MmaOptions& options)
      : rewriter(rewriter), tasks(tasks), ops(ops), options(options), update(ops.update),
        element(update.getKey().getType().getElementType()),
        dk(update.getKey().getType().getDimSize(3)), dv(update.getValue().getType().getDimSize(3)),
        rows(update.getAcc().getType().getDimSize(3)), warps(rows / 16),
        block(update.getMaxKeys().value_or(0)),
        cType(VectorType::get({2, 2}, rewriter.getF32Type())),
        cTypeI32(VectorType::get({2, 2}, rewriter.getI32Type())),
        aType(VectorType::get({4, 2}, element)), bType(VectorType::get({2, 2}, element)),
        probabilityShift(
            static_cast<float>(attnc::softmax::probabilityShiftFor(element.isF16()))) {}

  LogicalResult emit();

private:
  LogicalResult check();
  void emitLaneIds(ImplicitLocOpBuilder& b);
  void emitQueryFragments(ImplicitLocOpBuilder& b);
  Value copyTile(ImplicitLocOpBuilder& b, Value global, Value shared, int64_t width, Value firstKey,
                 Value validEnd);
  void waitAndSync(ImplicitLocOpBuilder& b, Value group);
  SmallVector<Value> emitScores(ImplicitLocOpBuilder& b);
  void applyTerms(ImplicitLocOpBuilder& b, SmallVector<Value>& s, Value keyBlock, Value keyEnd);
  Value gather(ImplicitLocOpBuilder& b, Value buffer, Value keyBase);
  Value quadReduce(ImplicitLocOpBuilder& b, Value x, bool max);
  Value rowsVector(ImplicitLocOpBuilder& b, Value row0, Value row1, VectorType type);
  void emitKeyLoop(ImplicitLocOpBuilder& b, IRMapping& map, Phase phase);
  void emitFinalize(ImplicitLocOpBuilder& b, IRMapping& map);
  void emitPartialStore(ImplicitLocOpBuilder& b, IRMapping& map);
  void emitCombine(ImplicitLocOpBuilder& b, IRMapping& map);
  Value workspaceRow(ImplicitLocOpBuilder& b, Value rowInTile);
  void emitLaunch(ImplicitLocOpBuilder& b, Phase phase, Value count, Value splits);
  void emitSplitOrWhole(ImplicitLocOpBuilder& b, Value count);
  void recordAlignedArgs(ImplicitLocOpBuilder& b);

  Value c(ImplicitLocOpBuilder& b, int64_t v) { return indexConstant(b, v); }
  Value mma(ImplicitLocOpBuilder& b, Value a, Value bFrag, Value acc) {
    return b.create<nvgpu::MmaSyncOp>(a, bFrag, acc, ArrayRef<int64_t>{16, 8, 16});
  }
  Value i32(ImplicitLocOpBuilder& b, Value index) {
    return b.create<arith::IndexCastOp>(b.getI32Type(), index);
  }

  RewriterBase& rewriter;
  scf::ForallOp tasks;
  TaskOps ops;
  MmaOptions options;
  OnlineUpdateOp update;
  Type element;
  const int64_t dk, dv, rows, warps, block;
  VectorType cType, cTypeI32, aType, bType;
  // P is rounded to the storage type for the PV MMA: no shift for f16 (OnlineSoftmax.h).
  float probabilityShift;

  // Unit-stride views of the tensors, made before the launch.
  Value query, key, value, output;
  // Split-key workspace: acc [splits, tasks * rows, dv], m and l [splits, tasks * rows].
  Value workAcc, workMax, workSum;
  // Inside the launch.
  Value taskIndex, splitIndex;   // block ids x and y
  Value splitCount;              // grid size y
  Value sharedK, sharedV;        // [block, dk + pad], [block, dv + pad]
  Value tid, lane, g, t;         // thread, lane, lane / 4, lane % 4
  Value batch, head, kvHead;     // this task's batch, head and K/V head
  Value myRows[2];               // the tile rows of this lane's C fragment rows (index)
  Value positions;               // their key positions i + off, as a C fragment (i32)
  Value lastRow, lastKey;        // Tq - 1, Tk - 1
  SmallVector<Value> queryFrags; // A fragments of Q, one per 16 columns of d_k
  std::optional<ScoreTerms> terms;
  // The state in registers after the key loop: m, l (per C row) and O (per 8 columns of d_v).
  Value maxRow[2], sumRow[2];
  SmallVector<Value> acc;
};

LogicalResult MmaLowering::check() {
  auto fail = [&]() { return update.emitOpError() << "lower_to_mma: "; };
  if (!element.isF16() && !element.isBF16())
    return fail() << "tensor cores take f16 or bf16 storage, not " << element;
  if (update.getQuery().getType().getElementType() != element ||
      update.getValue().getType().getElementType() != element)
    return fail() << "q, k and v must share one element type";
  if (dk % 16 != 0 || dv % 16 != 0)
    return fail() << "d_k = " << dk << " and d_v = " << dv << " must be multiples of 16";
  if (ShapedType::isDynamic(rows) || rows % 16 != 0 || warps > 32)
    return fail() << "the query tile (" << rows << " rows) must be 16 rows per warp, at most "
                  << "32 warps";
  if (block <= 0 || block % 16 != 0)
    return fail() << "the key block (max_keys " << block << ") must be a multiple of 16";
  const int64_t bytes = mmaSharedBytes(block, dk, dv, element.getIntOrFloatBitWidth() / 8);
  if (bytes > kMmaSharedLimit)
    return fail() << "K and V tiles of " << block << " keys need " << bytes
                  << " bytes of shared memory; at most " << kMmaSharedLimit << " (use a smaller "
                  << "key block)";
  if (update.hasPackedQuery())
    return fail() << "the query must not be packed";
  return success();
}

void MmaLowering::emitLaneIds(ImplicitLocOpBuilder& b) {
  tid = b.create<gpu::ThreadIdOp>(gpu::Dimension::x);
  lane = b.create<arith::RemUIOp>(tid, c(b, kWarpSize));
  g = b.create<arith::DivUIOp>(lane, c(b, 4));
  t = b.create<arith::RemUIOp>(lane, c(b, 4));
}

// [[x0, x0], [x1, x1]]: a value per C fragment row, as a vector of `type`.
Value MmaLowering::rowsVector(ImplicitLocOpBuilder& b, Value row0, Value row1, VectorType type) {
  auto half = VectorType::get({2}, type.getElementType());
  Value v = b.create<vector::BroadcastOp>(type, row0);
  return b.create<vector::InsertOp>(b.create<vector::BroadcastOp>(half, row1), v, 1);
}

// A fragments of the query tile's 16 rows of this warp, straight from global memory: each
// lane loads its 8 elements per 16 columns as 4 pairs (once per task; rows past Tq repeat
// the last row, their results are never stored).
void MmaLowering::emitQueryFragments(ImplicitLocOpBuilder& b) {
  auto pair = VectorType::get({2}, element);
  Value rowsClamped[2] = {b.create<arith::MinUIOp>(myRows[0], lastRow),
                          b.create<arith::MinUIOp>(myRows[1], lastRow)};
  Value twoT = b.create<arith::MulIOp>(t, c(b, 2));
  for (int64_t kk = 0; kk < dk / 16; ++kk) {
    Value frag =
        b.create<arith::ConstantOp>(DenseElementsAttr::get(aType, b.getFloatAttr(element, 0.0)));
    for (int64_t i = 0; i < 4; ++i) {
      Value column = b.create<arith::AddIOp>(twoT, c(b, 16 * kk + 8 * (i / 2)));
      Value x = b.create<vector::LoadOp>(pair, query,
                                         ValueRange{batch, head, rowsClamped[i % 2], column});
      frag = b.create<vector::InsertOp>(x, frag, i);
    }
    queryFrags.push_back(frag);
  }
}

// Issues cp.async copies of keys [firstKey, firstKey + block) x [0, width) of `global` (K or
// V of this task's K/V head) into `shared`, 16 bytes per copy, the threads sharing the
// chunks; keys at or past validEnd are zero-filled (their address clamped into the tensor).
// Returns the group to wait on.
Value MmaLowering::copyTile(ImplicitLocOpBuilder& b, Value global, Value shared, int64_t width,
                            Value firstKey, Value validEnd) {
  const int64_t perRow = width / kChunk, chunks = block * perRow, threads = warps * kWarpSize;
  SmallVector<Value> copies;
  for (int64_t i = 0; i < (chunks + threads - 1) / threads; ++i) {
    // Threads past the last chunk copy it again: the same bytes to the same place.
    Value chunk =
        b.create<arith::MinUIOp>(b.create<arith::AddIOp>(tid, c(b, i * threads)), c(b, chunks - 1));
    Value row = b.create<arith::DivUIOp>(chunk, c(b, perRow));
    Value column =
        b.create<arith::MulIOp>(b.create<arith::RemUIOp>(chunk, c(b, perRow)), c(b, kChunk));
    Value keyIndex = b.create<arith::AddIOp>(firstKey, row);
    Value valid = b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, keyIndex, validEnd);
    Value source = b.create<arith::MinUIOp>(keyIndex, lastKey);
    Value sourceElements = b.create<arith::SelectOp>(valid, c(b, kChunk), c(b, 0));
    copies.push_back(b.create<nvgpu::DeviceAsyncCopyOp>(
        nvgpu::DeviceAsyncTokenType::get(b.getContext()), shared, ValueRange{row, column}, global,
        ValueRange{batch, kvHead, source, column}, b.getIndexAttr(kChunk), sourceElements,
        b.getUnitAttr()));
  }
  return b.create<nvgpu::DeviceAsyncCreateGroupOp>(nvgpu::DeviceAsyncTokenType::get(b.getContext()),
                                                   copies);
}

// Waits for this thread's copies, then for every thread: the tile is complete, and no warp
// still reads the tile the next copy overwrites.
void MmaLowering::waitAndSync(ImplicitLocOpBuilder& b, Value group) {
  b.create<nvgpu::DeviceAsyncWaitOp>(group, b.getI32IntegerAttr(0));
  b.create<gpu::BarrierOp>();
}

// S = Q K^T for the key block in shared memory: block / 8 C fragments. An ldmatrix.x4 reads
// the B fragments of two key tiles: lanes 0-7 address keys 0-7 at columns 0-7 of the k-step,
// lanes 8-15 keys 0-7 at columns 8-15, lanes 16-31 the same for keys 8-15.
SmallVector<Value> MmaLowering::emitScores(ImplicitLocOpBuilder& b) {
  Value row = b.create<arith::AddIOp>(
      b.create<arith::RemUIOp>(lane, c(b, 8)),
      b.create<arith::MulIOp>(b.create<arith::DivUIOp>(lane, c(b, 16)), c(b, 8)));
  Value column = b.create<arith::MulIOp>(
      b.create<arith::RemUIOp>(b.create<arith::DivUIOp>(lane, c(b, 8)), c(b, 2)), c(b, 8));
  Value zero = splatConstant(b, cType, 0);
  SmallVector<Value> s(block / 8, zero);
  auto fragType = VectorType::get({4, 2}, element);
  for (int64_t kk = 0; kk < dk / 16; ++kk)
    for (int64_t pair = 0; pair < block / 16; ++pair) {
      Value frag =
          b.create<nvgpu::LdMatrixOp>(fragType, sharedK,
                                      ValueRange{b.create<arith::AddIOp>(row, c(b, 16 * pair)),
                                                 b.create<arith::AddIOp>(column, c(b, 16 * kk))},
                                      /*transpose=*/false, /*numTiles=*/4);
      for (int64_t half = 0; half < 2; ++half) {
        Value bFrag = b.create<vector::ExtractStridedSliceOp>(
            frag, ArrayRef<int64_t>{2 * half, 0}, ArrayRef<int64_t>{2, 2}, ArrayRef<int64_t>{1, 1});
        s[2 * pair + half] = mma(b, queryFrags[kk], bFrag, s[2 * pair + half]);
      }
    }
  return s;
}

// The elements of a bias or mask buffer at this lane's C fragment positions of key tile
// keyBase: rows past Tq and keys past Tk are clamped (those scores are never kept).
Value MmaLowering::gather(ImplicitLocOpBuilder& b, Value buffer, Value keyBase) {
  auto type = cast<MemRefType>(buffer.getType());
  auto broadcastIndex = [&](int64_t dim, Value index) -> Value {
    Value single = b.create<arith::CmpIOp>(arith::CmpIPredicate::eq,
                                           b.create<memref::DimOp>(buffer, dim), c(b, 1));
    return b.create<arith::SelectOp>(single, c(b, 0), index);
  };
  Value bb = broadcastIndex(0, batch), hh = broadcastIndex(1, head);
  bool isFloat = isa<FloatType>(type.getElementType());
  auto resultType = VectorType::get({2, 2}, isFloat ? b.getF32Type() : type.getElementType());
  Value result = splatConstant(b, resultType, 0);
  for (int64_t r = 0; r < 2; ++r) {
    Value row = b.create<arith::MinUIOp>(myRows[r], lastRow);
    for (int64_t col = 0; col < 2; ++col) {
      Value keyIndex =
          b.create<arith::MinUIOp>(b.create<arith::AddIOp>(keyBase, c(b, col)), lastKey);
      Value x = isFloat
                    ? loadF32(b, buffer, {bb, hh, row, keyIndex})
                    : Value(b.create<memref::LoadOp>(buffer, ValueRange{bb, hh, row, keyIndex}));
      result = b.create<vector::InsertOp>(x, result, ArrayRef<int64_t>{r, col});
    }
  }
  return result;
}

// s = terms(scale * s) for key tile j at keys keyBlock + 8 j + 2 t + {0, 1}, and -inf for
// keys at or past keyEnd (the block's end).
void MmaLowering::applyTerms(ImplicitLocOpBuilder& b, SmallVector<Value>& s, Value keyBlock,
                             Value keyEnd) {
  Value scale = splatConstant(b, cType, update.getScale().convertToDouble());
  Value twoT = b.create<arith::MulIOp>(t, c(b, 2));
  Value pairOffsets =
      b.create<arith::ConstantOp>(DenseElementsAttr::get(cTypeI32, ArrayRef<int32_t>{0, 1, 0, 1}));
  Value end = b.create<vector::BroadcastOp>(cTypeI32, i32(b, keyEnd));
  for (int64_t j = 0; j < block / 8; ++j) {
    Value keyBase = b.create<arith::AddIOp>(b.create<arith::AddIOp>(keyBlock, c(b, 8 * j)), twoT);
    Value keys = b.create<arith::AddIOp>(b.create<vector::BroadcastOp>(cTypeI32, i32(b, keyBase)),
                                         pairOffsets);
    Value x = b.create<arith::MulFOp>(s[j], scale);
    x = terms->apply(b, x, positions, keys, [&](ImplicitLocOpBuilder& gb, Value buffer) {
      return gather(gb, buffer, keyBase);
    });
    Value inBlock = b.create<arith::CmpIOp>(arith::CmpIPredicate::slt, keys, end);
    s[j] = b.create<arith::SelectOp>(inBlock, x, splatConstant(b, cType, -kInf));
  }
}

// The max or sum of x over the 4 lanes of a quad (the lanes holding one C row).
Value MmaLowering::quadReduce(ImplicitLocOpBuilder& b, Value x, bool max) {
  Value width = b.create<arith::ConstantOp>(b.getI32IntegerAttr(kWarpSize));
  for (int32_t offset : {1, 2}) {
    Value other =
        b.create<gpu::ShuffleOp>(x, b.create<arith::ConstantOp>(b.getI32IntegerAttr(offset)), width,
                                 gpu::ShuffleMode::XOR)
            .getShuffleResult();
    x = max ? Value(b.create<arith::MaximumFOp>(x, other))
            : Value(b.create<arith::AddFOp>(x, other));
  }
  return x;
}

void MmaLowering::emitKeyLoop(ImplicitLocOpBuilder& b, IRMapping& map, Phase phase) {
  ValueRange offsets = update.getOffsets();
  batch = map.lookupOrDefault(offsets[0]);
  head = map.lookupOrDefault(offsets[1]);
  const int64_t group = update.getNumHeads() / update.getKey().getType().getDimSize(1);
  kvHead = b.create<arith::DivUIOp>(head, c(b, group));
  Value warpRow = b.create<arith::AddIOp>(
      map.lookupOrDefault(offsets[2]),
      b.create<arith::MulIOp>(b.create<arith::DivUIOp>(tid, c(b, kWarpSize)), c(b, 16)));
  myRows[0] = b.create<arith::AddIOp>(warpRow, g);
  myRows[1] = b.create<arith::AddIOp>(myRows[0], c(b, 8));
  lastRow = b.create<arith::SubIOp>(map.lookupOrDefault(update.getSeqQ()), c(b, 1));
  lastKey = b.create<arith::SubIOp>(b.create<memref::DimOp>(key, 2), c(b, 1));
  Value off = ScoreTerms::positionOffset(b, update);
  positions = rowsVector(b, i32(b, b.create<arith::AddIOp>(myRows[0], off)),
                         i32(b, b.create<arith::AddIOp>(myRows[1], off)), cTypeI32);
  emitQueryFragments(b);
  terms.emplace(b, update, batch, head);

  // The first K tile, then the loop over key blocks with the state in registers.
  scf::ForOp keys = ops.keys;
  Value lower = map.lookupOrDefault(keys.getLowerBound()),
        upper = map.lookupOrDefault(keys.getUpperBound());
  if (phase == Phase::Partial) {
    // Split s takes `per` whole key blocks from lower + s * per (possibly none).
    Value span = b.create<arith::MaxSIOp>(b.create<arith::SubIOp>(upper, lower), c(b, 0));
    Value per = b.create<arith::MulIOp>(
        b.create<arith::CeilDivSIOp>(b.create<arith::CeilDivSIOp>(span, c(b, block)), splitCount),
        c(b, block));
    lower = b.create<arith::AddIOp>(lower, b.create<arith::MulIOp>(splitIndex, per));
    upper = b.create<arith::MinSIOp>(upper, b.create<arith::AddIOp>(lower, per));
  }
  waitAndSync(b, copyTile(b, key, sharedK, dk, lower, upper));
  SmallVector<Value> state{f32Constant(b, -kInf), f32Constant(b, -kInf), f32Constant(b, 0),
                           f32Constant(b, 0)};
  state.append(dv / 8, splatConstant(b, cType, 0));
  auto loop = b.create<scf::ForOp>(lower, upper, c(b, block), state);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    map.map(keys.getInductionVar(), loop.getInductionVar());
    for (Operation& op : keys.getBody()->without_terminator())
      if (&op != update.getOperation())
        b.clone(op, map);
    Value keyBlock = loop.getInductionVar();
    Value keyEnd = b.create<arith::AddIOp>(keyBlock, map.lookupOrDefault(update.getSizes()[3]));
    ValueRange carried = loop.getRegionIterArgs();

    Value valueGroup = copyTile(b, value, sharedV, dv, keyBlock, keyEnd);
    SmallVector<Value> s = emitScores(b);
    applyTerms(b, s, keyBlock, keyEnd);

    // m' = max(m, rowmax S); alpha = exp(m - m') (0 while m = -inf); P = exp(S - m' - c), its
    // scale e^-c keeping the accumulators from overflowing (c = probabilityShift).
    Value log2e = f32Constant(b, kLog2e);
    Value newMax[2], alpha[2], scaledMax[2];
    for (int64_t r = 0; r < 2; ++r) {
      Value x = carried[r];
      for (Value sj : s)
        for (int64_t col = 0; col < 2; ++col)
          x = b.create<arith::MaximumFOp>(
              x, b.create<vector::ExtractOp>(sj, ArrayRef<int64_t>{r, col}));
      newMax[r] = quadReduce(b, x, /*max=*/true);
      using P = arith::CmpFPredicate;
      Value empty = b.create<arith::CmpFOp>(P::OEQ, newMax[r], f32Constant(b, -kInf));
      Value safe = b.create<arith::SelectOp>(empty, f32Constant(b, 0), newMax[r]);
      scaledMax[r] = b.create<arith::MulFOp>(
          b.create<arith::AddFOp>(safe, f32Constant(b, probabilityShift)), log2e);
      Value wasEmpty = b.create<arith::CmpFOp>(P::OEQ, carried[r], f32Constant(b, -kInf));
      Value a = b.create<math::Exp2Op>(
          b.create<arith::MulFOp>(b.create<arith::SubFOp>(carried[r], safe), log2e));
      alpha[r] = b.create<arith::SelectOp>(wasEmpty, f32Constant(b, 0), a);
    }
    Value shift = rowsVector(b, scaledMax[0], scaledMax[1], cType);
    Value log2eSplat = splatConstant(b, cType, kLog2e);
    Value sums[2] = {b.create<arith::MulFOp>(alpha[0], carried[2]),
                     b.create<arith::MulFOp>(alpha[1], carried[3])};
    for (Value& sj : s) {
      Value masked =
          b.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, sj, splatConstant(b, cType, -kInf));
      Value p = b.create<math::Exp2Op>(
          b.create<vector::FMAOp>(sj, log2eSplat, b.create<arith::NegFOp>(shift)));
      sj = b.create<arith::SelectOp>(masked, splatConstant(b, cType, 0), p);
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t col = 0; col < 2; ++col)
          sums[r] = b.create<arith::AddFOp>(
              sums[r], b.create<vector::ExtractOp>(sj, ArrayRef<int64_t>{r, col}));
    }

    // V has landed and every warp is done with K: fetch the next K tile during P V.
    waitAndSync(b, valueGroup);
    Value nextBlock = b.create<arith::AddIOp>(keyBlock, c(b, block));
    Value keyGroup = copyTile(b, key, sharedK, dk, nextBlock, upper);

    // O = alpha O + P V. An ldmatrix.x4.trans reads the B fragments of two 8-column tiles of
    // V: lanes 0-7 address keys 0-7, lanes 8-15 keys 8-15 (columns 0-7), lanes 16-31 the same
    // at columns 8-15.
    Value alphaRows = rowsVector(b, alpha[0], alpha[1], cType);
    SmallVector<Value> o;
    for (Value x : carried.drop_front(4))
      o.push_back(b.create<arith::MulFOp>(x, alphaRows));
    Value vRow = b.create<arith::AddIOp>(
        b.create<arith::RemUIOp>(lane, c(b, 8)),
        b.create<arith::MulIOp>(
            b.create<arith::RemUIOp>(b.create<arith::DivUIOp>(lane, c(b, 8)), c(b, 2)), c(b, 8)));
    Value vColumn = b.create<arith::MulIOp>(b.create<arith::DivUIOp>(lane, c(b, 16)), c(b, 8));
    auto fragType = VectorType::get({4, 2}, element);
    for (int64_t kk = 0; kk < block / 16; ++kk) {
      Value lo = b.create<arith::TruncFOp>(bType, s[2 * kk]);
      Value hi = b.create<arith::TruncFOp>(bType, s[2 * kk + 1]);
      Value pFrag = b.create<vector::ShuffleOp>(lo, hi, ArrayRef<int64_t>{0, 1, 2, 3});
      for (int64_t pair = 0; pair < dv / 16; ++pair) {
        Value frag = b.create<nvgpu::LdMatrixOp>(
            fragType, sharedV,
            ValueRange{b.create<arith::AddIOp>(vRow, c(b, 16 * kk)),
                       b.create<arith::AddIOp>(vColumn, c(b, 16 * pair))},
            /*transpose=*/true, /*numTiles=*/4);
        for (int64_t half = 0; half < 2; ++half) {
          Value bFrag = b.create<vector::ExtractStridedSliceOp>(
              frag, ArrayRef<int64_t>{2 * half, 0}, ArrayRef<int64_t>{2, 2},
              ArrayRef<int64_t>{1, 1});
          o[2 * pair + half] = mma(b, pFrag, bFrag, o[2 * pair + half]);
        }
      }
    }
    waitAndSync(b, keyGroup);
    SmallVector<Value> next{newMax[0], newMax[1], sums[0], sums[1]};
    next.append(o);
    b.create<scf::YieldOp>(next);
  }
  maxRow[0] = loop.getResult(0);
  maxRow[1] = loop.getResult(1);
  sumRow[0] = loop.getResult(2);
  sumRow[1] = loop.getResult(3);
  acc.assign(loop.getResults().begin() + 4, loop.getResults().end());
}

// O = acc / l (0 where l = 0) and lse = m + c + log l (-inf where l = 0), for the rows < Tq.
void MmaLowering::emitFinalize(ImplicitLocOpBuilder& b, IRMapping& map) {
  OnlineFinalizeOp finalize = ops.finalize;
  Value rowEnd = b.create<arith::AddIOp>(map.lookupOrDefault(finalize.getOffsets()[2]),
                                         map.lookupOrDefault(finalize.getSizes()[2]));
  Type outElement = cast<MemRefType>(output.getType()).getElementType();
  auto outPair = VectorType::get({2}, outElement);
  Value twoT = b.create<arith::MulIOp>(t, c(b, 2));
  for (int64_t r = 0; r < 2; ++r) {
    Value sum = quadReduce(b, sumRow[r], /*max=*/false);
    Value empty = b.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, sum, f32Constant(b, 0));
    Value inverse = b.create<arith::SelectOp>(empty, f32Constant(b, 0),
                                              b.create<arith::DivFOp>(f32Constant(b, 1), sum));
    Value live = b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, myRows[r], rowEnd);
    auto ifLive = b.create<scf::IfOp>(live, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifLive.thenBlock());
    Value inverseRow = b.create<vector::BroadcastOp>(VectorType::get({2}, b.getF32Type()), inverse);
    for (auto [n, fragment] : llvm::enumerate(acc)) {
      Value x = b.create<arith::MulFOp>(b.create<vector::ExtractOp>(fragment, r), inverseRow);
      if (outElement != b.getF32Type())
        x = b.create<arith::TruncFOp>(outPair, x);
      Value column = b.create<arith::AddIOp>(twoT, c(b, 8 * static_cast<int64_t>(n)));
      b.create<vector::StoreOp>(x, output, ValueRange{batch, head, myRows[r], column});
    }
    if (Value lse = finalize.getLse()) {
      Value first = b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, t, c(b, 0));
      auto ifFirst = b.create<scf::IfOp>(first, /*withElseRegion=*/false);
      b.setInsertionPointToStart(ifFirst.thenBlock());
      Value x = b.create<arith::AddFOp>(
          b.create<arith::AddFOp>(maxRow[r], f32Constant(b, probabilityShift)),
          b.create<math::LogOp>(sum));
      x = b.create<arith::SelectOp>(empty, f32Constant(b, -kInf), x);
      b.create<memref::StoreOp>(x, map.lookupOrDefault(lse), ValueRange{batch, head, myRows[r]});
    }
  }
}

// The workspace row of a row of this task's tile.
Value MmaLowering::workspaceRow(ImplicitLocOpBuilder& b, Value rowInTile) {
  return b.create<arith::AddIOp>(b.create<arith::MulIOp>(taskIndex, c(b, rows)), rowInTile);
}

// A split's unnormalised state into the workspace: acc as the C fragments hold it, m and l
// (reduced over the quad) once per row.
void MmaLowering::emitPartialStore(ImplicitLocOpBuilder& b, IRMapping& map) {
  Value rowBase = map.lookupOrDefault(ops.finalize.getOffsets()[2]);
  Value twoT = b.create<arith::MulIOp>(t, c(b, 2));
  for (int64_t r = 0; r < 2; ++r) {
    Value sum = quadReduce(b, sumRow[r], /*max=*/false);
    Value row = workspaceRow(b, b.create<arith::SubIOp>(myRows[r], rowBase));
    for (auto [n, fragment] : llvm::enumerate(acc)) {
      Value column = b.create<arith::AddIOp>(twoT, c(b, 8 * static_cast<int64_t>(n)));
      b.create<vector::StoreOp>(b.create<vector::ExtractOp>(fragment, r), workAcc,
                                ValueRange{splitIndex, row, column});
    }
    Value first = b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, t, c(b, 0));
    auto ifFirst = b.create<scf::IfOp>(first, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifFirst.thenBlock());
    b.create<memref::StoreOp>(maxRow[r], workMax, ValueRange{splitIndex, row});
    b.create<memref::StoreOp>(sum, workSum, ValueRange{splitIndex, row});
  }
}

// The merge of the splits, one thread per row of the tile: M = max_s m_s, w_s = exp(m_s - M)
// (0 for a split that kept nothing), L = sum_s w_s l_s, O = sum_s w_s acc_s / L (0 when L = 0),
// lse = M + c + log L (-inf when L = 0).
void MmaLowering::emitCombine(ImplicitLocOpBuilder& b, IRMapping& map) {
  OnlineFinalizeOp finalize = ops.finalize;
  Value batchIndex = map.lookupOrDefault(finalize.getOffsets()[0]);
  Value headIndex = map.lookupOrDefault(finalize.getOffsets()[1]);
  Value rowBase = map.lookupOrDefault(finalize.getOffsets()[2]);
  Value row = b.create<arith::AddIOp>(rowBase, tid);
  Value live = b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, tid,
                                       map.lookupOrDefault(finalize.getSizes()[2]));
  auto ifLive = b.create<scf::IfOp>(live, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifLive.thenBlock());
  Value workRow = workspaceRow(b, tid);
  Value zero = c(b, 0), one = c(b, 1), splits = b.create<memref::DimOp>(workMax, 0);
  auto overSplits = [&](ImplicitLocOpBuilder& at, Value init, auto&& body) {
    return at
        .create<scf::ForOp>(zero, splits, one, ValueRange{init},
                            [&](OpBuilder& nested, Location loc, Value s, ValueRange carried) {
                              ImplicitLocOpBuilder ib(loc, nested);
                              ib.create<scf::YieldOp>(ValueRange{Value(body(ib, s, carried[0]))});
                            })
        .getResult(0);
  };
  Value max = overSplits(b, f32Constant(b, -kInf), [&](ImplicitLocOpBuilder& ib, Value s, Value m) {
    return ib.create<arith::MaximumFOp>(m,
                                        ib.create<memref::LoadOp>(workMax, ValueRange{s, workRow}));
  });
  using P = arith::CmpFPredicate;
  Value safe = b.create<arith::SelectOp>(
      b.create<arith::CmpFOp>(P::OEQ, max, f32Constant(b, -kInf)), f32Constant(b, 0), max);
  auto weight = [&](ImplicitLocOpBuilder& ib, Value s) -> Value {
    Value m = ib.create<memref::LoadOp>(workMax, ValueRange{s, workRow});
    Value w = ib.create<math::Exp2Op>(
        ib.create<arith::MulFOp>(ib.create<arith::SubFOp>(m, safe), f32Constant(ib, kLog2e)));
    Value empty = ib.create<arith::CmpFOp>(P::OEQ, m, f32Constant(ib, -kInf));
    return ib.create<arith::SelectOp>(empty, f32Constant(ib, 0), w);
  };
  Value sum = overSplits(b, f32Constant(b, 0), [&](ImplicitLocOpBuilder& ib, Value s, Value l) {
    Value ls = ib.create<memref::LoadOp>(workSum, ValueRange{s, workRow});
    return ib.create<arith::AddFOp>(l, ib.create<arith::MulFOp>(weight(ib, s), ls));
  });
  Value empty = b.create<arith::CmpFOp>(P::OEQ, sum, f32Constant(b, 0));
  Value inverse = b.create<arith::SelectOp>(empty, f32Constant(b, 0),
                                            b.create<arith::DivFOp>(f32Constant(b, 1), sum));
  forRange(b, zero, c(b, dv), [&](ImplicitLocOpBuilder& cb, Value column) {
    Value o = overSplits(cb, f32Constant(cb, 0), [&](ImplicitLocOpBuilder& ib, Value s, Value x) {
      Value a = ib.create<memref::LoadOp>(workAcc, ValueRange{s, workRow, column});
      return ib.create<arith::AddFOp>(x, ib.create<arith::MulFOp>(weight(ib, s), a));
    });
    storeF32(cb, cb.create<arith::MulFOp>(o, inverse), output,
             {batchIndex, headIndex, row, column});
  });
  if (Value lse = finalize.getLse()) {
    // The partial states share the scale e^-c: lse = m + c + log l.
    Value x = b.create<arith::AddFOp>(
        b.create<arith::AddFOp>(max, f32Constant(b, probabilityShift)), b.create<math::LogOp>(sum));
    x = b.create<arith::SelectOp>(empty, f32Constant(b, -kInf), x);
    b.create<memref::StoreOp>(x, map.lookupOrDefault(lse), ValueRange{batchIndex, headIndex, row});
  }
}

// The host check of MmaContract.h: the function arguments that cp.async and the paired loads
// and stores read, as a bit mask in a public constant the bundle's entry reads.
void MmaLowering::recordAlignedArgs(ImplicitLocOpBuilder& b) {
  int32_t mask = 0;
  for (Value v : {update.getQuery(), update.getKey(), update.getValue(), ops.finalize.getOutput()})
    if (int64_t index = argumentIndex(v); index >= 0)
      mask |= 1 << index;
  auto module = tasks->getParentOfType<ModuleOp>();
  if (module.lookupSymbol(kMmaAlignedArgsSymbol))
    return;
  OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
  auto type = MemRefType::get({}, b.getI32Type());
  mb.create<memref::GlobalOp>(
      b.getLoc(), kMmaAlignedArgsSymbol, mb.getStringAttr("public"), type,
      DenseElementsAttr::get(RankedTensorType::get({}, b.getI32Type()), mask),
      /*constant=*/true, IntegerAttr());
}

// One gpu.launch of the task loop for `phase`: blocks (tasks, splits) of 16-row warps, or for
// the merge one thread per row; the task's own index arithmetic is cloned into it.
void MmaLowering::emitLaunch(ImplicitLocOpBuilder& b, Phase phase, Value count, Value splits) {
  Value one = c(b, 1);
  Value threads = c(b, phase == Phase::Combine ? rows : warps * kWarpSize);
  auto launch = b.create<gpu::LaunchOp>(count, splits, one, threads, one, one);
  if (phase != Phase::Combine) {
    auto workgroup = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
    sharedK = launch.addWorkgroupAttribution(
        MemRefType::get({block, dk + kMmaRowPad}, element, MemRefLayoutAttrInterface(), workgroup),
        b.getLoc());
    sharedV = launch.addWorkgroupAttribution(
        MemRefType::get({block, dv + kMmaRowPad}, element, MemRefLayoutAttrInterface(), workgroup),
        b.getLoc());
  }
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&launch.getBody().front());
  taskIndex = launch.getBlockIds().x;
  splitIndex = launch.getBlockIds().y;
  splitCount = launch.getGridSize().y;
  emitLaneIds(b);
  queryFrags.clear();

  // The task's own ops in order; the state buffers and the online ops become registers.
  IRMapping map;
  map.map(tasks.getInductionVar(0), taskIndex);
  llvm::SmallPtrSet<Operation*, 4> stateBuffers;
  for (Value buffer : ops.init->getOperands())
    stateBuffers.insert(buffer.getDefiningOp());
  for (Operation& op : tasks.getBody()->without_terminator()) {
    if (&op == ops.keys.getOperation()) {
      if (phase != Phase::Combine)
        emitKeyLoop(b, map, phase);
    } else if (&op == ops.finalize.getOperation()) {
      if (phase == Phase::Whole)
        emitFinalize(b, map);
      else if (phase == Phase::Partial)
        emitPartialStore(b, map);
      else
        emitCombine(b, map);
    } else if (&op != ops.init.getOperation() && !stateBuffers.contains(&op)) {
      b.clone(op, map);
    }
  }
  b.create<gpu::TerminatorOp>();
}

// splits = clamp(ceil(fill_blocks / tasks), 1, min(max_key_splits, key blocks of Tk)); one
// split runs the single-pass kernel, more run the split kernel and the merge on a workspace
// allocated on the caller's stream.
void MmaLowering::emitSplitOrWhole(ImplicitLocOpBuilder& b, Value count) {
  Value one = c(b, 1);
  Value keyBlocks = b.create<arith::CeilDivUIOp>(b.create<memref::DimOp>(key, 2), c(b, block));
  Value wanted =
      b.create<arith::CeilDivUIOp>(c(b, options.fillBlocks), b.create<arith::MaxUIOp>(count, one));
  Value splits = b.create<arith::MaxUIOp>(
      one, b.create<arith::MinUIOp>(
               wanted, b.create<arith::MinUIOp>(c(b, options.maxKeySplits), keyBlocks)));
  auto ifSplit = b.create<scf::IfOp>(
      b.create<arith::CmpIOp>(arith::CmpIPredicate::ugt, splits, one), /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(ifSplit.elseBlock()->getTerminator());
  emitLaunch(b, Phase::Whole, count, one);

  b.setInsertionPoint(ifSplit.thenBlock()->getTerminator());
  auto tokenType = gpu::AsyncTokenType::get(b.getContext());
  Value token = b.create<gpu::WaitOp>(tokenType, ValueRange{}).getAsyncToken();
  Value workRows = b.create<arith::MulIOp>(count, c(b, rows));
  auto alloc = [&](ArrayRef<int64_t> shape, ValueRange sizes) {
    auto op = b.create<gpu::AllocOp>(MemRefType::get(shape, b.getF32Type()), tokenType,
                                     ValueRange{token}, sizes, ValueRange{});
    token = op.getAsyncToken();
    return op.getMemref();
  };
  const int64_t dyn = ShapedType::kDynamic;
  workAcc = alloc({dyn, dyn, dv}, {splits, workRows});
  workMax = alloc({dyn, dyn}, {splits, workRows});
  workSum = alloc({dyn, dyn}, {splits, workRows});
  emitLaunch(b, Phase::Partial, count, splits);
  emitLaunch(b, Phase::Combine, count, one);
  for (Value buffer : {workAcc, workMax, workSum})
    token = b.create<gpu::DeallocOp>(tokenType, ValueRange{token}, buffer).getAsyncToken();
  b.create<gpu::WaitOp>(Type(), ValueRange{token});
}

LogicalResult MmaLowering::emit() {
  if (failed(check()))
    return failure();
  ImplicitLocOpBuilder b(tasks.getLoc(), rewriter);
  b.setInsertionPoint(tasks);
  recordAlignedArgs(b);
  query = unitStrideView(b, update.getQuery());
  key = unitStrideView(b, update.getKey());
  value = unitStrideView(b, update.getValue());
  output = unitStrideView(b, ops.finalize.getOutput());
  Value count = getValueOrCreateConstantIndexOp(b, b.getLoc(), tasks.getMixedUpperBound()[0]);
  if (options.maxKeySplits > 1)
    emitSplitOrWhole(b, count);
  else
    emitLaunch(b, Phase::Whole, count, c(b, 1));
  tasks->getParentOfType<func::FuncOp>()->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  rewriter.eraseOp(tasks);
  return success();
}

} // namespace

LogicalResult lowerTasksToMma(RewriterBase& rewriter, scf::ForallOp tasks,
                              const MmaOptions& options) {
  FailureOr<TaskOps> ops = matchTask(tasks);
  if (failed(ops))
    return failure();
  return MmaLowering(rewriter, tasks, *ops, options).emit();
}

} // namespace attnc::attn
