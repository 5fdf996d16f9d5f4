//===- OnlineState.h - the online softmax's state -------------------------===//
//
// The online softmax's state, written once for every kernel: the CPU prefill (LowerUpdate) and
// its finalize (LowerStateOps), the CPU decode kernel and its merge (LowerDecode), the weights
// (LowerWeights), the tensor-core one-pass and split-key kernels and their merge (MmaOnePass,
// MmaSplitKey).
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_KIT_ONLINESTATE_H
#define ATTNC_DIALECTS_ATTN_KIT_ONLINESTATE_H

#include "Semantics/OnlineSoftmax.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include "llvm/ADT/STLFunctionalExtras.h"

namespace attnc::attn {

// How a kernel takes e^x. The CPU kernels: math.exp (attn-approximate-math's polynomial) and
// probabilityExp for the probabilities. The tensor-core kernels: 2^(x log2 e), one ex2.approx
// each (attn-lower-to-nvvm-intrinsics).
enum class Exponential { Natural, Base2 };

// A finished row: o = acc * inverse, lse = finishedLse(max, sum).
struct FinishedRow {
  mlir::Value max, sum, inverse;
};

// A row's partial states of the splits of its keys merged by their maxima (flash-decoding):
// M = max(sink, max_s m_s) and L = e^(sink - M' - c) + sum_s w_s l_s, w_s = e^(m_s - M') (0 for
// a split that kept nothing), M' = finiteMax(M). A caller sums o = sum_s w_s A_s / L itself
// (splitWeight), in whatever tiles its accumulators have.
struct MergedSplits {
  mlir::Value max, safeMax, sum, inverse;
};

// One kernel's online softmax (Semantics/OnlineSoftmax.h), on f32 scalars and vectors alike: a
// row's state is its running max m, its sum l of probabilities p = e^(s - m - c) and its
// accumulator A = sum p v; a block of scores moves m to m' and carries l and A over by
// e^(m - m'); partial states merge by their maxima; a finished state gives o = A / l and
// lse = m + c + log l. `exponential` is how the kernel takes e^x, `shift` its c.
class OnlineState {
public:
  explicit OnlineState(Exponential exponential = Exponential::Natural,
                       double shift = attnc::softmax::kProbabilityShift)
      : exponential(exponential), shift(shift) {}

  // m, or 0 where m is -inf (nothing kept yet): the max a block's probabilities are taken
  // against.
  mlir::Value finiteMax(mlir::ImplicitLocOpBuilder& b, mlir::Value m) const;
  // e^(from - to), or 0 where `from` is -inf (a state that kept nothing): the factor that
  // carries a state kept against the max `from` over to the finite max `to`.
  mlir::Value rescaleFactor(mlir::ImplicitLocOpBuilder& b, mlir::Value from, mlir::Value to) const;
  // What a block's scores are taken against, from the row's finite max m': m' + c, or in base 2
  // (m' + c) log2 e.
  mlir::Value probabilityOffset(mlir::ImplicitLocOpBuilder& b, mlir::Value safeMax) const;
  // A vector of probabilities p = e^(s - m' - c) of scores s against probabilityOffset's
  // `offset` (probabilityExp in base e, one exp2 of s log2 e - offset in base 2).
  mlir::Value probability(mlir::ImplicitLocOpBuilder& b, mlir::Value s, mlir::Value offset) const;
  // l' = alpha l + blockSum.
  mlir::Value carriedSum(mlir::ImplicitLocOpBuilder& b, mlir::Value alpha, mlir::Value sum,
                         mlir::Value blockSum) const;

  // A row's state (m, l) finished, with the sink (or null) folded in first: m' = max(m, sink)
  // (NaN stays NaN), l' = l e^(m - m') + e^(sink - m' - c), and acc scaled by e^(m - m') through
  // the inverse, e^(m - m') / l'.
  FinishedRow finish(mlir::ImplicitLocOpBuilder& b, mlir::Value m, mlir::Value l,
                     mlir::Value sink) const;
  // `splits` partial states, split s's max and sum read by maxOf(s) and sumOf(s), and the
  // sink (or null) merged, each sum a loop over the splits.
  using SplitRead = llvm::function_ref<mlir::Value(mlir::ImplicitLocOpBuilder&, mlir::Value)>;
  MergedSplits mergeSplits(mlir::ImplicitLocOpBuilder& b, mlir::Value splits, SplitRead maxOf,
                           SplitRead sumOf, mlir::Value sink) const;
  // w_s = e^(m_s - M') of the split whose max is `splitMax`.
  mlir::Value splitWeight(mlir::ImplicitLocOpBuilder& b, const MergedSplits& merged,
                          mlir::Value splitMax) const {
    return rescaleFactor(b, splitMax, merged.safeMax);
  }
  // 1 / l, or 0 where l is 0 (a row that kept nothing gives o = 0).
  mlir::Value inverseSum(mlir::ImplicitLocOpBuilder& b, mlir::Value l) const;
  // lse = m + c + log l, or -inf where l is 0.
  mlir::Value finishedLse(mlir::ImplicitLocOpBuilder& b, mlir::Value m, mlir::Value l) const;

private:
  // The attention sink (online_finalize's `sinks`) as a partial state of its own: a logit with
  // no value, m = sink, l = e^-c, acc = 0. Carried over to the finite max `to`, its share of the
  // sum is e^(sink - to - c), or 0 where the sink is -inf.
  mlir::Value sinkShare(mlir::ImplicitLocOpBuilder& b, mlir::Value sink, mlir::Value to) const;
  // e^x in the kernel's exponential.
  mlir::Value exp(mlir::ImplicitLocOpBuilder& b, mlir::Value x) const;

  Exponential exponential;
  double shift;
};

// e^x for the probabilities of the CPU kernels, x = s - m - c <= 0 (m the row's max, c >= 0 the
// state's shift, OnlineSoftmax.h), where every result below 2^-125 (with kProbabilityShift, an
// e^(s - m) below 2^-94) may come out as about 2^-125 instead, against a sum of at least e^-c:
// 2^n e^r with n = round(x log2 e), r = x - n ln 2 (Cody and Waite's two parts) and a degree-7
// polynomial (Taylor's, 5e-9 relative), 18 vector ops against MLIR's polynomial's 25 (math.exp
// keeps every range, and stays for everything else). NaN stays NaN.
mlir::Value probabilityExp(mlir::ImplicitLocOpBuilder& b, mlir::Value x);

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_KIT_ONLINESTATE_H
