// IEEE arithmetic for the float parts of a Halide Expr, op by op. Halide 14 compiles floats with
// LLVM's fast-math flags, under which an operation on NaN or an infinity is poison; its
// strict_float() lifts them, but only for the code generated inside the call. Halide's CSE and
// loop-invariant lifting move subexpressions into lets outside it: `inf + h` lifted from
// max(score, min(exp(1000.0) + h, 5.0)) came out as rows of 0, and a tile classifier's
// 1e30 * 1e30 dropped keys it had to keep. Wrapping every float operation by itself keeps each
// lifted part strict, since what is lifted is the wrapped operation whole.
#ifndef ATTNC_COMPILER_BACKENDS_HALIDE_STRICTFLOATS_H
#define ATTNC_COMPILER_BACKENDS_HALIDE_STRICTFLOATS_H

#include <Halide.h>

namespace attnc::halide {

// e with each operation that computes or compares floats inside its own strict_float().
Halide::Expr strictFloats(const Halide::Expr& e);

} // namespace attnc::halide

#endif // ATTNC_COMPILER_BACKENDS_HALIDE_STRICTFLOATS_H
