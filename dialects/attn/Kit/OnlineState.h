//===- OnlineState.h - the online softmax's state -------------------------===//
//
// The online softmax's state arithmetic (Semantics/OnlineSoftmax.h), on f32 scalars and vectors
// alike: running max m, sum l and accumulator; rescaling a state to a new max, the probabilities
// against it, the sink as a partial state of its own, and finishing (1 / l, the LSE). Every
// kernel's state is built from these.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_KIT_ONLINESTATE_H
#define ATTNC_DIALECTS_ATTN_KIT_ONLINESTATE_H

#include "Semantics/OnlineSoftmax.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace attnc::attn {

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

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_KIT_ONLINESTATE_H
