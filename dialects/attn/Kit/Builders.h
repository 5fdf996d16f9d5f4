//===- Builders.h - small IR builders -------------------------------------===//
//
// The IR every kit part and kernel builds alike: constants, counted loops, clamped indices
// and where a kernel's phases begin.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_KIT_BUILDERS_H
#define ATTNC_DIALECTS_ATTN_KIT_BUILDERS_H

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include <functional>

namespace attnc::attn {

mlir::Value indexConstant(mlir::ImplicitLocOpBuilder& b, int64_t value);
mlir::Value f32Constant(mlir::ImplicitLocOpBuilder& b, double value);
// A vector of `lanes` f32 lanes all equal to `value`.
mlir::Value f32Splat(mlir::ImplicitLocOpBuilder& b, int64_t lanes, double value);

// A stack table of f64 constants (a position's frequencies), filled where it is allocated.
mlir::Value f64Table(mlir::ImplicitLocOpBuilder& b, llvm::ArrayRef<double> values);

// An aux tensor index (i32 or index) clamped into [0, last], as index: how every kernel reads an
// aux tensor (the spec proved the indices inside it, but rows past Tq are evaluated too), and so
// how the tile classifiers bound and scan those reads.
mlir::Value clampIndex(mlir::ImplicitLocOpBuilder& b, mlir::Value index, mlir::Value last);

// The first op of a kernel's block that runs as a phase or becomes one: a phase added before
// the kernel's own goes before it, after every workspace allocation (attn-outline-tasks needs
// them first).
mlir::Operation* firstPhase(mlir::Block& block);
// b's insertion point moved before the first phase of its block, in a kernel still being built
// (a workspace buffer's place); where no phase is there yet it stays where it is, at the end,
// before every phase to come.
void insertBeforePhases(mlir::OpBuilder& b);

// A kernel's workspace buffer of `type`: allocated before the first phase of `body` (the
// kernel's block) with the dynamic sizes `sizes` builds there, and freed at the block's end.
mlir::Value workspaceBuffer(
    mlir::ImplicitLocOpBuilder& b, mlir::Block& body, mlir::MemRefType type,
    const std::function<llvm::SmallVector<mlir::Value>(mlir::ImplicitLocOpBuilder&)>& sizes);

// A phase placed before `before` (an op of a kernel's block): a task per `chunk` rows of each
// (batch entry, head) of `rows` [B, H, T, ...] (H static), task(b, bi, h, first) building the
// task of rows [first, first + chunk) of batch entry bi and head h (those below T are real).
void rowChunkPhase(mlir::ImplicitLocOpBuilder& b, mlir::Operation* before, mlir::Value rows,
                   int64_t chunk,
                   const std::function<void(mlir::ImplicitLocOpBuilder&, mlir::Value bi,
                                            mlir::Value h, mlir::Value first)>& task);

// `count` as a phase's task count that canonicalization cannot fold to a constant: a forall of
// one static task (sinks of one head, a small table's sums) would be inlined by scf.forall's
// single-iteration folder, leaving its body beside the kernel's phases, where
// attn-outline-tasks and attn-map-tasks-to-gpu find no phase. min(count, count + extent), with
// `extent` known only at run time (B), is count.
mlir::Value unfoldedTaskCount(mlir::ImplicitLocOpBuilder& b, mlir::Value count, mlir::Value extent);

// `buffer` (a memref of any strides) as a view whose stride of `dim` is a static 1, and whether
// that stride is 1 at run time: where it is, the view reads the same elements, and vector loads
// and constant offsets from one address can.
std::pair<mlir::Value, mlir::Value> unitStrideView(mlir::ImplicitLocOpBuilder& b,
                                                   mlir::Value buffer, int64_t dim);
// unitStrideView of the innermost dim.
std::pair<mlir::Value, mlir::Value> unitInnerStrideView(mlir::ImplicitLocOpBuilder& b,
                                                        mlir::Value buffer);

// byView(view) where `buffer`'s innermost stride is 1 at run time (view: unitInnerStrideView's,
// whose rows vector loads and stores can move), byElements() otherwise: scf.if's two branches,
// built while b still points before the scf.if.
void ifUnitInnerStride(
    mlir::ImplicitLocOpBuilder& b, mlir::Value buffer,
    const std::function<void(mlir::ImplicitLocOpBuilder&, mlir::Value view)>& byView,
    const std::function<void(mlir::ImplicitLocOpBuilder&)>& byElements);

// lines[v] stored into `buffer` at places[v]: plain vector stores where `whole` (i1) holds at
// run time, every lane of every line inside, else masked stores with edgeMask(v) (a masked
// store is slow, and needed at a tile's edges only; the masks are built in that branch).
void storeLinesWhereWhole(
    mlir::ImplicitLocOpBuilder& b, mlir::Value buffer, mlir::ArrayRef<mlir::Value> lines,
    mlir::ArrayRef<llvm::SmallVector<mlir::Value, 4>> places, mlir::Value whole,
    const std::function<mlir::Value(mlir::ImplicitLocOpBuilder&, int64_t v)>& edgeMask);

// Elements of `buffer` in a 64-byte cache line (what one prefetch brings).
int64_t elementsPerCacheLine(mlir::Value buffer);

// n vectors of n lanes transposed (lane l of vector i becomes lane i of vector l), n a power of
// 2: log2 n stages that swap the off-diagonal b x b blocks of every 2b x 2b block, b = n / 2,
// ..., 1, each a two-source shuffle per vector (a vpermt2d on AVX-512).
llvm::SmallVector<mlir::Value> transposeLanes(mlir::ImplicitLocOpBuilder& b,
                                              llvm::SmallVector<mlir::Value> rows);

// for (i = lower; i < upper; ++i) body(i), as scf.for.
void forRange(mlir::ImplicitLocOpBuilder& b, mlir::Value lower, mlir::Value upper,
              const std::function<void(mlir::ImplicitLocOpBuilder&, mlir::Value)>& body);

// body(i_0, ..., i_n-1) for every index of the box [lower, upper), as nested scf.for loops,
// the last dimension innermost.
void forEachIndex(
    mlir::ImplicitLocOpBuilder& b, mlir::ArrayRef<mlir::Value> lower,
    mlir::ArrayRef<mlir::Value> upper,
    const std::function<void(mlir::ImplicitLocOpBuilder&, mlir::ArrayRef<mlir::Value>)>& body);

// for (i = lower; i < upper; ++i) carried = body(i, carried), from `init`, as scf.for: the
// carried values after the last iteration.
llvm::SmallVector<mlir::Value>
foldRange(mlir::ImplicitLocOpBuilder& b, mlir::Value lower, mlir::Value upper,
          mlir::ValueRange init,
          llvm::function_ref<llvm::SmallVector<mlir::Value>(mlir::ImplicitLocOpBuilder&,
                                                            mlir::Value, mlir::ValueRange)>
              body);

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_KIT_BUILDERS_H
