//===- GatherCache.cpp - a paged or quantized KV cache copied into plain buffers ===//
//
// Only the decode kernels (LowerDecode.cpp, lower_to_mma's decode tiles) read K and V through a
// block table and dequantise quantized rows as they go. For the others, a phase of its own at
// the start of the ops' block (the kernel's, or a branch's) copies each sequence's keys and
// values into buffers [B, H_kv, Tk, d] of the query's type (int8 or
// fp8 E4M3 rows decoded and times their scales) that the ops read instead: O(B Tk d) copies
// against the prefill's O(Tq Tk d) work. A task copies `rows` positions of one sequence for
// every head (CPUs), or a run of adjacent columns of one head at one position (GPUs: a thread
// each); in a paged cache the positions past seq_lens[b] are zero, and their block table entries
// are not read.
//
//===---------------------------------------------------------------------------===//
#include "attn/IR/AttnOps.h"
#include "attn/Kit/Builders.h"
#include "attn/Kit/CacheRows.h"
#include "attn/Kit/Elements.h"
#include "attn/Transforms/Transforms.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include "llvm/ADT/MapVector.h"

#include <algorithm>
#include <bit>
#include <functional>

using namespace mlir;

namespace attnc::attn {
namespace {

// A cache buffer the ops read, its scales (quantized rows) and the plain buffer it becomes.
struct Gathered {
  Value scale, buffer;
};

using Inside = std::function<void(ImplicitLocOpBuilder&, Value, Value)>;
using Outside = std::function<void(ImplicitLocOpBuilder&)>;
using RunBody = std::function<void(ImplicitLocOpBuilder&, ArrayRef<Value>)>;

class CacheGather {
public:
  CacheGather(RewriterBase& rewriter, SmallVector<ScoreOpInterface> cacheOps)
      : rewriter(rewriter), ops(std::move(cacheOps)), block(*ops.front()->getBlock()),
        table(ops.front().getBlockTable()), lengths(ops.front().getSeqLens()) {}

  LogicalResult emit(int64_t rows, int64_t columns);

private:
  // Each cache buffer once, whichever ops read it: keys [B or pages, H_kv, Tk or page_size, d].
  void collectBuffers();
  // The plain buffers [B, H_kv, Tk, d], after the last definition of what they copy.
  ImplicitLocOpBuilder allocateBuffers();
  // An element of the cache into the buffer at `to`; a quantized row's elements (decoded up to
  // their codes' factor) times `factor`, its scale with that factor (scaleOf).
  void storeElement(ImplicitLocOpBuilder& at, Value element, const Gathered& entry, Value factor,
                    ValueRange to);
  Value scaleOf(ImplicitLocOpBuilder& at, Value rowsOf, const Gathered& entry, Value outer, Value g,
                Value row);
  Value zeroOf(ImplicitLocOpBuilder& at, const Gathered& entry);
  // Position j of the sequence: `inside` with its place in the cache (outer, row) while j is
  // below the sequence's length (read through the block table), else `outside` (zeros).
  void atPosition(ImplicitLocOpBuilder& at, Value sequence, Value j, const Inside& inside,
                  const Outside& outside);
  // A task per `rows` positions of a sequence, every head and column of each (a CPU core's
  // share of the copy, read row by row, a quantized row's scale once).
  void emitRowTasks(ImplicitLocOpBuilder& b, int64_t rows);
  // A task per run of adjacent columns of one head at one position (GPUs).
  void emitColumnTasks(ImplicitLocOpBuilder& b, int64_t columns);
  // The ops read the buffers, as plain keys [B, H_kv, Tk, d], freed at the block's end.
  void redirectOps(ImplicitLocOpBuilder& b);

  RewriterBase& rewriter;
  SmallVector<ScoreOpInterface> ops;
  Block& block;
  Value table, lengths;
  llvm::MapVector<Value, Gathered> gathered;
  Value zero, batch, seqK;
  std::optional<CacheRows> cache;
};

void CacheGather::collectBuffers() {
  for (ScoreOpInterface op : ops) {
    gathered.insert({op.getKey(), {op.getKeyScale(), Value()}});
    if (auto update = dyn_cast<OnlineUpdateOp>(op.getOperation()))
      gathered.insert({update.getValue(), {update.getValueScale(), Value()}});
  }
}

ImplicitLocOpBuilder CacheGather::allocateBuffers() {
  Operation* lastDefinition = nullptr;
  for (auto& [rowsOf, entry] : gathered)
    for (Value v : {rowsOf, entry.scale})
      if (Operation* def = v ? v.getDefiningOp() : nullptr;
          def && def->getBlock() == &block &&
          (!lastDefinition || lastDefinition->isBeforeInBlock(def)))
        lastDefinition = def;
  if (lastDefinition)
    rewriter.setInsertionPointAfter(lastDefinition);
  else
    rewriter.setInsertionPointToStart(&block);
  ImplicitLocOpBuilder b(ops.front()->getLoc(), rewriter);
  zero = indexConstant(b, 0);
  Value anyRows = gathered.front().first;
  batch = table ? b.create<memref::DimOp>(table, 0).getResult()
                : b.create<memref::DimOp>(anyRows, 0).getResult();
  seqK = CacheRows::keys(b, anyRows, table);
  // The runtime checked the block table's entries below seq_lens; `place` clamps the others.
  cache.emplace(b, anyRows, table);
  Type queryElement = cast<MemRefType>(ops.front()->getOperand(0).getType()).getElementType();
  for (auto& [rowsOf, entry] : gathered) {
    auto type = cast<MemRefType>(rowsOf.getType());
    entry.buffer = b.create<memref::AllocOp>(
        MemRefType::get({ShapedType::kDynamic, type.getDimSize(1), ShapedType::kDynamic,
                         type.getDimSize(3)},
                        entry.scale ? queryElement : type.getElementType()),
        ValueRange{batch, seqK});
  }
  return b;
}

void CacheGather::storeElement(ImplicitLocOpBuilder& at, Value element, const Gathered& entry,
                               Value factor, ValueRange to) {
  if (!factor)
    at.create<memref::StoreOp>(element, entry.buffer, to);
  else
    storeF32(at, at.create<arith::MulFOp>(toF32Unscaled(at, element), factor), entry.buffer, to);
}

Value CacheGather::scaleOf(ImplicitLocOpBuilder& at, Value rowsOf, const Gathered& entry,
                           Value outer, Value g, Value row) {
  if (!entry.scale)
    return Value();
  return CacheRows::rowScale(at, entry.scale, rowsOf, outer, g, row);
}

Value CacheGather::zeroOf(ImplicitLocOpBuilder& at, const Gathered& entry) {
  auto bufferType = cast<MemRefType>(entry.buffer.getType());
  return at.create<arith::ConstantOp>(at.getZeroAttr(bufferType.getElementType()));
}

void CacheGather::atPosition(ImplicitLocOpBuilder& at, Value sequence, Value j,
                             const Inside& inside, const Outside& outside) {
  if (!table) {
    inside(at, sequence, j);
    return;
  }
  Value length = at.create<arith::IndexCastOp>(
      at.getIndexType(), at.create<memref::LoadOp>(lengths, ValueRange{sequence}));
  auto ifInside = at.create<scf::IfOp>(
      at.create<arith::CmpIOp>(arith::CmpIPredicate::slt, j, length), /*withElseRegion=*/true);
  auto then = ImplicitLocOpBuilder::atBlockTerminator(at.getLoc(), ifInside.thenBlock());
  auto [page, row] = cache->place(then, sequence, j);
  inside(then, page, row);
  auto otherwise = ImplicitLocOpBuilder::atBlockTerminator(at.getLoc(), ifInside.elseBlock());
  outside(otherwise);
}

// Every (g, c) of a buffer's row: head(g) first, then element(g, c) for each column.
void forRow(ImplicitLocOpBuilder& at, Value zero, Value rowsOf,
            const std::function<void(ImplicitLocOpBuilder&, Value)>& head,
            const std::function<void(ImplicitLocOpBuilder&, Value, Value)>& element) {
  auto type = cast<MemRefType>(rowsOf.getType());
  forRange(at, zero, indexConstant(at, type.getDimSize(1)), [&](ImplicitLocOpBuilder& hb, Value g) {
    head(hb, g);
    forRange(hb, zero, indexConstant(hb, type.getDimSize(3)),
             [&](ImplicitLocOpBuilder& cb, Value c) { element(cb, g, c); });
  });
}

void CacheGather::emitRowTasks(ImplicitLocOpBuilder& b, int64_t rows) {
  Value tileRows = indexConstant(b, rows);
  Value chunks = b.create<arith::CeilDivUIOp>(seqK, tileRows);
  auto forall = b.create<scf::ForallOp>(
      ArrayRef<OpFoldResult>{b.create<arith::MulIOp>(batch, chunks).getResult()}, ValueRange{},
      std::nullopt);
  b.setInsertionPoint(forall.getBody()->getTerminator());
  Value task = forall.getInductionVar(0);
  Value sequence = b.create<arith::DivUIOp>(task, chunks);
  Value first = b.create<arith::MulIOp>(b.create<arith::RemUIOp>(task, chunks), tileRows);
  Value last = b.create<arith::MinUIOp>(b.create<arith::AddIOp>(first, tileRows), seqK);
  auto copy = [&](ImplicitLocOpBuilder& at, Value j, Value outer, Value row) {
    for (auto& [rowsOf, entry] : gathered) {
      Value factor;
      forRow(
          at, zero, rowsOf,
          [&](ImplicitLocOpBuilder& hb, Value g) {
            factor = scaleOf(hb, rowsOf, entry, outer, g, row);
          },
          [&](ImplicitLocOpBuilder& cb, Value g, Value c) {
            Value element = cb.create<memref::LoadOp>(rowsOf, ValueRange{outer, g, row, c});
            storeElement(cb, element, entry, factor, {sequence, g, j, c});
          });
    }
  };
  auto zeros = [&](ImplicitLocOpBuilder& at, Value j) {
    for (auto& [rowsOf, entry] : gathered) {
      Value zeroValue = zeroOf(at, entry);
      forRow(
          at, zero, rowsOf, [](ImplicitLocOpBuilder&, Value) {},
          [&](ImplicitLocOpBuilder& cb, Value g, Value c) {
            cb.create<memref::StoreOp>(zeroValue, entry.buffer, ValueRange{sequence, g, j, c});
          });
    }
  };
  forRange(b, first, last, [&](ImplicitLocOpBuilder& jb, Value j) {
    atPosition(
        jb, sequence, j,
        [&](ImplicitLocOpBuilder& at, Value outer, Value row) { copy(at, j, outer, row); },
        [&](ImplicitLocOpBuilder& at) { zeros(at, j); });
  });
}

// The run of adjacent columns a GPU thread copies: the most columns, up to `columns` and a
// power of two, that divides every head's width, and the widest head (K and V share their heads,
// H_kv, and may differ in their widths, d_k and d_v: a task covers the wider, each buffer its
// own).
std::pair<int64_t, int64_t> columnRun(const llvm::MapVector<Value, Gathered>& gathered,
                                      int64_t columns) {
  int64_t width = 0;
  uint64_t run = std::bit_floor(static_cast<uint64_t>(columns));
  for (auto& [rowsOf, entry] : gathered) {
    auto type = cast<MemRefType>(rowsOf.getType());
    width = std::max(width, type.getDimSize(3));
    while (type.getDimSize(3) % run != 0)
      run /= 2;
  }
  return {static_cast<int64_t>(run), width};
}

// `body` with the run's columns from firstColumn, where the run is inside the buffer's width (a
// multiple of the run, so a run is wholly inside or outside). It gets them all at once so that
// a copy issues its loads before its stores, which they cannot be proven not to alias.
void overRun(ImplicitLocOpBuilder& at, Value rowsOf, Value firstColumn, int64_t run, int64_t width,
             const RunBody& body) {
  const int64_t extent = cast<MemRefType>(rowsOf.getType()).getDimSize(3);
  auto withColumns = [&](ImplicitLocOpBuilder& cb) {
    SmallVector<Value> columnsOfRun{firstColumn};
    for (int64_t i = 1; i < run; ++i)
      columnsOfRun.push_back(cb.create<arith::AddIOp>(firstColumn, indexConstant(cb, i)));
    body(cb, columnsOfRun);
  };
  if (extent == width) {
    withColumns(at);
    return;
  }
  Value inside =
      at.create<arith::CmpIOp>(arith::CmpIPredicate::ult, firstColumn, indexConstant(at, extent));
  auto ifInside = at.create<scf::IfOp>(inside, /*withElseRegion=*/false);
  auto then = ImplicitLocOpBuilder::atBlockTerminator(at.getLoc(), ifInside.thenBlock());
  withColumns(then);
}

// On a GPU a thread each, the columns fastest, so that neighbouring threads copy neighbouring
// bytes, and a run's elements share the index arithmetic (a division by Tk) and the row's scale.
void CacheGather::emitColumnTasks(ImplicitLocOpBuilder& b, int64_t columns) {
  const int64_t heads = cast<MemRefType>(gathered.front().first.getType()).getDimSize(1);
  const auto [run, width] = columnRun(gathered, columns);
  const int64_t runs = width / run;
  Value runsPerHead = indexConstant(b, runs), perPosition = indexConstant(b, heads * runs);
  Value tasks = b.create<arith::MulIOp>(b.create<arith::MulIOp>(batch, seqK), perPosition);
  auto forall = b.create<scf::ForallOp>(ArrayRef<OpFoldResult>{tasks}, ValueRange{}, std::nullopt);
  b.setInsertionPoint(forall.getBody()->getTerminator());
  Value task = forall.getInductionVar(0);
  Value firstColumn =
      b.create<arith::MulIOp>(b.create<arith::RemUIOp>(task, runsPerHead), indexConstant(b, run));
  Value g = b.create<arith::RemUIOp>(b.create<arith::DivUIOp>(task, runsPerHead),
                                     indexConstant(b, heads));
  Value position = b.create<arith::DivUIOp>(task, perPosition);
  Value j = b.create<arith::RemUIOp>(position, seqK);
  Value sequence = b.create<arith::DivUIOp>(position, seqK);
  auto copy = [&](ImplicitLocOpBuilder& at, Value outer, Value row) {
    for (auto& [rowsOf, entry] : gathered) {
      Value factor = scaleOf(at, rowsOf, entry, outer, g, row);
      overRun(
          at, rowsOf, firstColumn, run, width,
          [&](ImplicitLocOpBuilder& cb, ArrayRef<Value> columnsOfRun) {
            SmallVector<Value> elements;
            for (Value c : columnsOfRun)
              elements.push_back(cb.create<memref::LoadOp>(rowsOf, ValueRange{outer, g, row, c}));
            for (auto [c, element] : llvm::zip(columnsOfRun, elements))
              storeElement(cb, element, entry, factor, {sequence, g, j, c});
          });
    }
  };
  auto zeros = [&](ImplicitLocOpBuilder& at) {
    for (auto& [rowsOf, entry] : gathered) {
      Value zeroValue = zeroOf(at, entry);
      overRun(
          at, rowsOf, firstColumn, run, width,
          [&](ImplicitLocOpBuilder& cb, ArrayRef<Value> columnsOfRun) {
            for (Value c : columnsOfRun)
              cb.create<memref::StoreOp>(zeroValue, entry.buffer, ValueRange{sequence, g, j, c});
          });
    }
  };
  atPosition(b, sequence, j, copy, zeros);
}

void CacheGather::redirectOps(ImplicitLocOpBuilder& b) {
  for (ScoreOpInterface op : ops)
    rewriter.modifyOpInPlace(op, [&] {
      if (auto update = dyn_cast<OnlineUpdateOp>(op.getOperation())) {
        update.getKeyMutable().assign(gathered.lookup(update.getKey()).buffer);
        update.getValueMutable().assign(gathered.lookup(update.getValue()).buffer);
        update.getBlockTableMutable().clear();
        update.getSeqLensMutable().clear();
        update.getKeyScaleMutable().clear();
        update.getValueScaleMutable().clear();
      } else {
        auto weights = cast<WeightsOp>(op.getOperation());
        weights.getKeyMutable().assign(gathered.lookup(weights.getKey()).buffer);
        weights.getBlockTableMutable().clear();
        weights.getSeqLensMutable().clear();
        weights.getKeyScaleMutable().clear();
      }
    });
  b.setInsertionPoint(block.getTerminator());
  for (auto& [rowsOf, entry] : gathered)
    b.create<memref::DeallocOp>(entry.buffer);
}

LogicalResult CacheGather::emit(int64_t rows, int64_t columns) {
  for (ScoreOpInterface op : ops)
    if (op->getBlock() != &block || op.getBlockTable() != table)
      return op->emitOpError() << "gather_cache: the cache's ops share one block and one block "
                                  "table";
  collectBuffers();
  ImplicitLocOpBuilder b = allocateBuffers();
  b.setInsertionPoint(firstPhase(block));
  if (rows > 0)
    emitRowTasks(b, rows);
  else
    emitColumnTasks(b, columns);
  redirectOps(b);
  return success();
}

} // namespace

LogicalResult gatherCache(RewriterBase& rewriter, Operation* root, int64_t rows, int64_t columns) {
  SmallVector<ScoreOpInterface> ops;
  root->walk([&](ScoreOpInterface op) {
    if (op.getBlockTable() || op.getKeyScale())
      ops.push_back(op);
  });
  if (ops.empty())
    return success();
  if (rows <= 0 && columns <= 0)
    return ops.front()->emitOpError()
           << "gather_cache: a task must copy at least one row or column";
  return CacheGather(rewriter, std::move(ops)).emit(rows, columns);
}

} // namespace attnc::attn
