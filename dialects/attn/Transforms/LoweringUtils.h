//===- LoweringUtils.h - helpers shared by the vector lowerings ---------------===//
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMS_LOWERINGUTILS_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMS_LOWERINGUTILS_H

#include "Semantics/OnlineSoftmax.h"
#include "attn/IR/AttnOps.h"
#include "attn/Transforms/PairedOperands.h"
#include "attn/Transforms/Transforms.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <functional>

namespace attnc::attn {

mlir::Value indexConstant(mlir::ImplicitLocOpBuilder& b, int64_t value);
mlir::Value f32Constant(mlir::ImplicitLocOpBuilder& b, double value);
// A vector of `lanes` f32 lanes all equal to `value`.
mlir::Value f32Splat(mlir::ImplicitLocOpBuilder& b, int64_t lanes, double value);

// The online softmax's state arithmetic (Semantics/OnlineSoftmax.h), on f32 scalars and vectors
// alike: every lowering of the state ops builds it here.
// m, or 0 where m is -inf (nothing kept yet): the max a block's probabilities are taken against.
mlir::Value finiteMax(mlir::ImplicitLocOpBuilder& b, mlir::Value m);
// e^(from - to), or 0 where `from` is -inf (a state that kept nothing): the factor that carries
// a state kept against the max `from` over to the finite max `to`.
mlir::Value rescaleFactor(mlir::ImplicitLocOpBuilder& b, mlir::Value from, mlir::Value to);
// e^x for the probabilities of the CPU kernels, x = s - m - c <= 0 (m the row's max, c >= 0 the
// state's shift, OnlineSoftmax.h), where every result below 2^-125 (with kProbabilityShift, an
// e^(s - m) below 2^-94) may come out as about 2^-125 instead, against a sum of at least e^-c:
// 2^n e^r with n = round(x log2 e), r = x - n ln 2 (Cody and Waite's two parts) and a degree-7
// polynomial (Taylor's, 5e-9 relative), 18 vector ops against MLIR's polynomial's 25 (math.exp
// keeps every range, and stays for everything else). NaN stays NaN.
mlir::Value probabilityExp(mlir::ImplicitLocOpBuilder& b, mlir::Value x);
// 1 / l, or 0 where l is 0 (a row that kept nothing gives o = 0).
mlir::Value inverseSum(mlir::ImplicitLocOpBuilder& b, mlir::Value l);
// lse = m + c + log l (l sums probabilities scaled by e^-c), or -inf where l is 0.
mlir::Value finishedLse(mlir::ImplicitLocOpBuilder& b, mlir::Value m, mlir::Value l);

// The attention sink (online_finalize's `sinks`) as a partial state of its own: a logit with no
// value, m = sink, l = e^-c, acc = 0. Carried over to the finite max `to`, its share of the sum
// is e^(sink - to - c), or 0 where the sink is -inf. `shift` is the state's c.
mlir::Value sinkShare(mlir::ImplicitLocOpBuilder& b, mlir::Value sink, mlir::Value to,
                      double shift = attnc::softmax::kProbabilityShift);
// A finished row state (m, l) with the sink taken in: m' = max(m, sink) (NaN stays NaN),
// l' = l e^(m - m') + e^(sink - m' - c), and accFactor = e^(m - m'), which acc is scaled by.
struct SinkFold {
  mlir::Value max, sum, accFactor;
};
SinkFold foldSink(mlir::ImplicitLocOpBuilder& b, mlir::Value m, mlir::Value l, mlir::Value sink,
                  double shift = attnc::softmax::kProbabilityShift);

// An aux tensor index (i32 or index) clamped into [0, last], as index: how every kernel reads an
// aux tensor (the spec proved the indices inside it, but rows past Tq are evaluated too), and so
// how the tile classifiers bound and scan those reads.
mlir::Value clampIndex(mlir::ImplicitLocOpBuilder& b, mlir::Value index, mlir::Value last);

// Tk of a KV cache whose rows are `rows` ([B or pages, H_kv, Tk or page_size, d]): its third
// dim, or with a block table the table's width times the page size.
mlir::Value cacheKeys(mlir::ImplicitLocOpBuilder& b, mlir::Value rows, mlir::Value table);
// A paged cache's last page, where pagedRow clamps block-table entries: its rows' (`rows`,
// [pages, H_kv, page_size, d]) first dim minus one.
mlir::Value cacheLastPage(mlir::ImplicitLocOpBuilder& b, mlir::Value rows);
// Where key `key` of sequence `sequence` lies in a paged cache of `pageSize` rows a page:
// (page, row) = (block_table[sequence, key / page_size] clamped into [0, lastPage],
// key mod page_size). The decode kernels read a key past the sequence's end from whatever page
// its entry names (the runtime checked only the entries below seq_lens) and drop or zero it.
std::pair<mlir::Value, mlir::Value> pagedRow(mlir::ImplicitLocOpBuilder& b, mlir::Value table,
                                             mlir::Value sequence, mlir::Value key,
                                             int64_t pageSize, mlir::Value lastPage);

// AVX512-BF16's vdpbf16ps (Semantics/PairedProducts.h): acc[l] + a[2l] b[2l] + a[2l+1] b[2l+1]
// for the 16 f32 lanes of acc and the 32 bf16 of a and b (denormal inputs and outputs flushed).
mlir::Value dotBf16Pairs(mlir::ImplicitLocOpBuilder& b, mlir::Value acc, mlir::Value a,
                         mlir::Value bPairs);
// The bf16 at `indices` of `buffer` (unit inner stride) and the next one as an i32, to
// broadcast as a pair.
mlir::Value loadBf16Pair(mlir::ImplicitLocOpBuilder& b, mlir::Value buffer,
                         mlir::ValueRange indices);
// A pair whose second element is 0: the bf16 at `indices` alone as an i32.
mlir::Value loadBf16Alone(mlir::ImplicitLocOpBuilder& b, mlir::Value buffer,
                          mlir::ValueRange indices);
// A vector of 16 f32 rounded to bf16 (to nearest even, vcvtneps2bf16).
mlir::Value roundToBf16(mlir::ImplicitLocOpBuilder& b, mlir::Value vector);
// An i32 pair in every lane of a vector of 2 x lanes bf16.
mlir::Value broadcastBf16Pair(mlir::ImplicitLocOpBuilder& b, mlir::Value pair, int64_t lanes);

// An element, scalar or vector, of a buffer the lowerings read as f32: f32 as it is, bf16/f16
// extended, an int8 cache's as its signed value, an fp8 E4M3 cache's (f8E4M3FN) decoded from its
// bits through binary16 (LLVM 19 lowers no f8 conversion; the value is attnc/Float8.hpp's).
mlir::Value toF32(mlir::ImplicitLocOpBuilder& b, mlir::Value element);
// toF32 up to a constant factor, for a caller that folds that factor into a scale it applies
// anyway (scaleForUnscaled): an fp8 E4M3 element comes out as 2^-8 its value, one product per
// element fewer; every other type as toF32 gives it.
mlir::Value toF32Unscaled(mlir::ImplicitLocOpBuilder& b, mlir::Value element);
// A quantized row's `scale` (a scalar or vector of f32) times the factor toF32Unscaled leaves
// out of the row's `codes` type (256 for fp8 E4M3; the scale itself for every other type).
mlir::Value scaleForUnscaled(mlir::ImplicitLocOpBuilder& b, mlir::Value scale, mlir::Type codes);
// Loads an element of a buffer as f32 (toF32).
mlir::Value loadF32(mlir::ImplicitLocOpBuilder& b, mlir::Value buffer, mlir::ValueRange indices);
// Stores an f32 into a float buffer of any float type (rounding to nearest even).
void storeF32(mlir::ImplicitLocOpBuilder& b, mlir::Value value, mlir::Value buffer,
              mlir::ValueRange indices);

// The first op of a kernel's block that runs as a phase or becomes one: a phase added before
// the kernel's own goes before it, after every workspace allocation (attn-outline-tasks needs
// them first).
mlir::Operation* firstPhase(mlir::Block& block);

// for (i = lower; i < upper; ++i) body(i), as scf.for.
void forRange(mlir::ImplicitLocOpBuilder& b, mlir::Value lower, mlir::Value upper,
              const std::function<void(mlir::ImplicitLocOpBuilder&, mlir::Value)>& body);

// A register tile's rank-1 update: acc[s * R + r] += rowVectors[r] * scalars[s] for the R
// vectors of query rows and each scalar (a key's or a value's element).
llvm::SmallVector<mlir::Value> rankOneUpdate(mlir::ImplicitLocOpBuilder& b,
                                             mlir::ArrayRef<mlir::Value> rowVectors,
                                             mlir::ArrayRef<mlir::Value> scalars,
                                             mlir::ValueRange acc);

// load(i) for the `lanes` query rows i = firstRow + lane, as one vector of `element`; rows past
// Tq read the last row (their results are never stored).
mlir::Value gatherRows(mlir::ImplicitLocOpBuilder& b, mlir::Value firstRow, mlir::Value seqQ,
                       int64_t lanes, mlir::Type element,
                       llvm::function_ref<mlir::Value(mlir::ImplicitLocOpBuilder&, mlir::Value)>
                           load);

// The lowering of each online op, emitted at the builder's insertion point (before the op).
void lowerInit(mlir::ImplicitLocOpBuilder& b, OnlineInitOp op);
void lowerPack(mlir::ImplicitLocOpBuilder& b, PackQueryOp op);
void lowerFinalize(mlir::ImplicitLocOpBuilder& b, OnlineFinalizeOp op);
// paired: K and V^T laid out for bf16 pair products (PairedOperands.h: AMX tiles or dot
// products, as options say), or null for f32 FMAs.
mlir::LogicalResult lowerUpdate(mlir::ImplicitLocOpBuilder& b, OnlineUpdateOp op,
                                const VectorOptions& options, const PairedOperands* paired);

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_LOWERINGUTILS_H
