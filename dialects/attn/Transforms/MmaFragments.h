//===- MmaFragments.h - warp-level blocks of the tensor-core kernels ----------===//
//
// What the kernels of lower_to_mma (MmaLowering.h) build on: a warp's lane ids and query
// rows, its query fragments, cp.async copies of K and V tiles into shared memory, S = Q K^T
// on m16n8k16 MMAs, the score terms at the fragments' positions and reductions over the 4
// lanes of a row.
//
// A task's tile holds the rows of one head, or with G heads per task (a decode tile of
// tile_queries pack_heads) tile row r is query row r / G of the task's head r % G: the two C
// rows a lane holds may then belong to different heads, and the terms are applied row by row.
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
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMS_MMAFRAGMENTS_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMS_MMAFRAGMENTS_H

#include "attn/IR/AttnOps.h"
#include "attn/Kit/Builders.h"
#include "attn/Kit/CacheRows.h"
#include "attn/Transforms/ScoreTerms.h"
#include "attn/Transforms/WarpAdds.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <limits>
#include <optional>

namespace attnc::attn {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The shape of a kernel's tiles: element type of the operands, head dims, rows per block (16
// per warp), keys (or queries) per shared-memory tile, and heads per task (a packed decode
// tile's G, else 1; 0: not static).
struct MmaShape {
  mlir::Type element;
  int64_t dk, dv, rows, block, headsPerTask;
};

// The building blocks, with the tile's shape and fragment types (fixed by the score op) and
// the values of this lane that they read (set inside each launch by the kernel being built).
class MmaFragments {
protected:
  MmaFragments(mlir::Builder& builder, ScoreOpInterface scoreOp, const MmaShape& shape);

  void emitLaneIds(mlir::ImplicitLocOpBuilder& b);
  mlir::Value rowsVector(mlir::ImplicitLocOpBuilder& b, mlir::Value row0, mlir::Value row1,
                         mlir::VectorType type);
  void emitQueryFragments(mlir::ImplicitLocOpBuilder& b, mlir::Value query);
  // A fragments of rows `rowsOf[0]` and `rowsOf[1]` (each clamped to `last`) of heads `heads`
  // of `tensor` [B, H, T, width], one per 16 columns.
  llvm::SmallVector<mlir::Value> rowFragments(mlir::ImplicitLocOpBuilder& b, mlir::Value tensor,
                                              const mlir::Value heads[2],
                                              const mlir::Value rowsOf[2], mlir::Value last,
                                              int64_t width);
  // copyTile of rows [firstKey, firstKey + block) of head `head` of `global`, rows past `last`
  // read from `last`.
  mlir::Value copyTile(mlir::ImplicitLocOpBuilder& b, mlir::Value global, mlir::Value shared,
                       int64_t width, mlir::Value firstKey, mlir::Value validEnd,
                       mlir::Value rowScales = {}, mlir::Value sharedScales = {}) {
    return copyRows(b, global, shared, width, kvHead, firstKey, validEnd, lastKey, rowScales,
                    sharedScales);
  }
  mlir::Value copyRows(mlir::ImplicitLocOpBuilder& b, mlir::Value global, mlir::Value shared,
                       int64_t width, mlir::Value head, mlir::Value firstKey, mlir::Value validEnd,
                       mlir::Value last, mlir::Value rowScales = {}, mlir::Value sharedScales = {});
  // The scales of key tile j's keys keyBlock + 8 j + 2 t + {0, 1} from `sharedScales`, in the C
  // fragment's shape.
  mlir::Value fragmentScales(mlir::ImplicitLocOpBuilder& b, mlir::Value sharedScales, int64_t j);
  void waitAndSync(mlir::ImplicitLocOpBuilder& b, mlir::Value group);
  llvm::SmallVector<mlir::Value> emitScores(mlir::ImplicitLocOpBuilder& b) {
    return rowProducts(b, queryFrags, sharedK, dk);
  }
  // A B^T for the 16 rows of A's fragments `a` (one per 16 columns of `width`) and the block's
  // rows of B in `shared` [block, width + pad]: block / 8 C fragments.
  llvm::SmallVector<mlir::Value> rowProducts(mlir::ImplicitLocOpBuilder& b,
                                             llvm::ArrayRef<mlir::Value> a, mlir::Value shared,
                                             int64_t width);
  // acc (width / 8 C fragments) += P B for P's C fragments `p` (block / 8, rounded to the
  // element type: A fragments as they are) and B = the block's rows in `shared`.
  void accumulateProducts(mlir::ImplicitLocOpBuilder& b, llvm::ArrayRef<mlir::Value> p,
                          mlir::Value shared, int64_t width,
                          llvm::SmallVectorImpl<mlir::Value>& acc);
  // The tile rows of this lane and their query rows and heads (myTileRows, myRows, myHeads),
  // and the score terms of those heads; `rowBase` is the task's first query row.
  void emitRows(mlir::ImplicitLocOpBuilder& b, mlir::Value rowBase);
  void applyTerms(mlir::ImplicitLocOpBuilder& b, llvm::SmallVector<mlir::Value>& s,
                  mlir::Value keyBlock, mlir::Value keyEnd);
  // The probabilities p of key tile j at keys keyBlock + 8 j + 2 t + {0, 1}, times dropout's
  // factor (ScoreTerms::dropout).
  mlir::Value applyDropout(mlir::ImplicitLocOpBuilder& b, mlir::Value p, mlir::Value keyBlock,
                           int64_t j);
  mlir::Value quadReduce(mlir::ImplicitLocOpBuilder& b, mlir::Value x, bool max);
  // acc[first] and acc[first + 1] += a times the two 8-column B fragments that one
  // ldmatrix.x4 (`transpose`d for V) reads from `shared` at (row + rowOffset, column +
  // columnOffset).
  void mmaTwoTiles(mlir::ImplicitLocOpBuilder& b, mlir::Value a, mlir::Value shared,
                   mlir::Value row, int64_t rowOffset, mlir::Value column, int64_t columnOffset,
                   bool transpose, llvm::SmallVectorImpl<mlir::Value>& acc, int64_t first);

  mlir::Value c(mlir::ImplicitLocOpBuilder& b, int64_t v) { return indexConstant(b, v); }
  mlir::Value i32(mlir::ImplicitLocOpBuilder& b, mlir::Value index) {
    return b.create<mlir::arith::IndexCastOp>(b.getI32Type(), index);
  }

  ScoreOpInterface scoreOp;
  mlir::Type element;
  const int64_t dk, dv, rows, warps, block;
  const int64_t headsPerTask; // G of a packed decode tile, else 1 (0: not static)
  mlir::VectorType cType, cTypeI32, aType, bType;

  // Inside the launch.
  mlir::Value sharedK, sharedV;           // [block, dk + pad], [block, dv + pad]
  mlir::Value sharedKScale, sharedVScale; // [block]: quantized rows' scales, else null
  mlir::Value tid, lane, g, t;            // thread, lane, lane / 4, lane % 4
  mlir::Value batch, head, kvHead;        // this task's batch, (first) head and K/V head
  mlir::Value myTileRows[2];              // the tile rows of this lane's C fragment rows
  mlir::Value myRows[2], myHeads[2];      // their query rows and heads
  mlir::Value positions;                  // their key positions i + off, as a C fragment (i32)
  mlir::Value lastRow, lastKey;           // Tq - 1, Tk - 1
  std::optional<CacheRows> cache;         // K's and V's rows, where copyTile finds a key
  mlir::Value sequenceEnd;                // a paged cache's seq_lens[batch], else null
  // A fragments of Q, one per 16 columns of d_k.
  llvm::SmallVector<mlir::Value> queryFrags;
  // The terms of the task's head, or of myHeads[0] and myHeads[1] when they differ (G heads
  // per task, G not dividing 8: rows g and g + 8 of a tile share a head when it does).
  std::optional<ScoreTerms> terms[2];

  // The key index of key tile j's first column held by this lane: keyBlock + 8 j + 2 t.
  mlir::Value keyBase(mlir::ImplicitLocOpBuilder& b, mlir::Value keyBlock, int64_t j);
  // keyBase + {0, 1} in the C fragment's shape (i32).
  mlir::Value fragmentKeys(mlir::ImplicitLocOpBuilder& b, mlir::Value base);

private:
  // f(terms, x, query positions, key positions) over a C fragment x: at once when the task
  // has one head, else C row by C row, each with its head's terms.
  mlir::Value perHead(mlir::ImplicitLocOpBuilder& b, mlir::Value x, mlir::Value keys,
                      llvm::function_ref<mlir::Value(const ScoreTerms&, mlir::Value, mlir::Value,
                                                     mlir::Value)>
                          f);
};

// Records in the public i32 constant `symbol` which function arguments `tensors` come from
// (through bshd's transposes): those the kernel copies by 16-byte chunks and reads and writes
// in pairs, which the bundle's entry checks for alignment (MmaContract.h); the bits of an
// earlier record of the same symbol stay. Defined in LowerToMma.cpp.
void recordAlignedArguments(mlir::ImplicitLocOpBuilder& b, mlir::ModuleOp module,
                            llvm::StringRef symbol, mlir::ValueRange tensors);

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_MMAFRAGMENTS_H
