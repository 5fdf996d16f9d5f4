// f32 Exprs with IEEE's special values. Halide 14 compiles floats as if NaN and Inf did not
// exist (LLVM's no-NaNs and no-infs flags), so a float comparison with them may be folded away:
// they are read and made through their bits, which integer compares keep. And its exp is a
// polynomial whose range reduction leaves the f32 range for large arguments (exp(1e10) came out
// 0), so exp's edges are set apart here.
#ifndef ATTNC_COMPILER_BACKENDS_HALIDE_IEEEFLOAT_H
#define ATTNC_COMPILER_BACKENDS_HALIDE_IEEEFLOAT_H

#include <Halide.h>
#include <cmath>
#include <cstdint>

namespace attnc::halide {

// A uint32 constant (bit patterns past 2^31 convert to Expr ambiguously).
inline Halide::Expr u32(uint32_t bits) {
  return Halide::Internal::make_const(Halide::UInt(32), uint64_t{bits});
}

inline Halide::Expr bitsOf(Halide::Expr x) {
  return Halide::reinterpret(Halide::UInt(32), x);
}

// NaN of either sign: an exponent of all ones and a nonzero fraction.
inline Halide::Expr isNaN(Halide::Expr x) {
  return (bitsOf(x) & Halide::cast<uint32_t>(0x7fffffff)) > Halide::cast<uint32_t>(0x7f800000);
}

inline Halide::Expr isPositiveInf(Halide::Expr x) {
  return bitsOf(x) == Halide::cast<uint32_t>(0x7f800000);
}

inline Halide::Expr isNegativeInf(Halide::Expr x) {
  return bitsOf(x) == u32(0xff800000);
}

inline Halide::Expr isInf(Halide::Expr x) {
  return (bitsOf(x) & Halide::cast<uint32_t>(0x7fffffff)) == Halide::cast<uint32_t>(0x7f800000);
}

// A quiet NaN and +inf made from their bits, which no no-NaN assumption can rewrite.
inline Halide::Expr quietNaN() {
  return Halide::reinterpret(Halide::Float(32), Halide::cast<uint32_t>(0x7fc00000));
}

inline Halide::Expr positiveInf() {
  return Halide::reinterpret(Halide::Float(32), Halide::cast<uint32_t>(0x7f800000));
}

inline Halide::Expr negativeInf() {
  return Halide::reinterpret(Halide::Float(32), u32(0xff800000));
}

// e^x with IEEE's results past f32's range: +inf above ln(FLT_MAX), 0 below the least
// subnormal's log, NaN for NaN; Halide's exp in between.
inline Halide::Expr ieeeExp(Halide::Expr x) {
  const float overflow = 88.7228394f, underflow = -103.972084f;
  return Halide::select(isNaN(x), x, x > overflow, positiveInf(), x < underflow, 0.0f,
                        Halide::exp(x));
}

// ln x with IEEE's results at the edges, where Halide's polynomial reads the exponent bits of
// values that have none to read: NaN below 0 and for NaN, -inf at 0, +inf at +inf.
inline Halide::Expr ieeeLog(Halide::Expr x) {
  return Halide::select(isNaN(x) || x < 0.0f, quietNaN(), x == 0.0f, -positiveInf(),
                        isPositiveInf(x), x, Halide::log(x));
}

// |x| by clearing the sign bit, as IEEE's abs: Halide's abs of a constant NaN (0.0 / 0.0) came
// out as a number, or as a refusal to compile ("division by constant zero").
inline Halide::Expr ieeeAbs(Halide::Expr x) {
  return Halide::reinterpret(Halide::Float(32), bitsOf(x) & Halide::cast<uint32_t>(0x7fffffff));
}

// x / d with IEEE's results where d is a constant zero, which Halide refuses to divide by (and
// whose product form, x * inf, its simplifier folds as if no NaN existed): x / ±0 is NaN for x
// NaN or 0, else the infinity of the quotient's sign.
inline Halide::Expr ieeeDivide(Halide::Expr x, Halide::Expr d) {
  const Halide::Expr divisor = Halide::Internal::simplify(d);
  const double* zero = Halide::Internal::as_const_float(divisor);
  if (!zero || *zero != 0)
    return x / d;
  const Halide::Expr inf = std::signbit(*zero) ? negativeInf() : positiveInf();
  return Halide::select(isNaN(x) || x == 0.0f, quietNaN(), x > 0.0f, inf, -inf);
}

// -x by flipping the sign bit, as IEEE's negation: Halide's is 0 - x, which is +0 for x = +0,
// so 1.0 / -(0.0) came out +inf.
inline Halide::Expr ieeeNegate(Halide::Expr x) {
  return Halide::reinterpret(Halide::Float(32), bitsOf(x) ^ u32(0x80000000));
}

// floor to a 32-bit int as the language has it: NaN gives 0, and values past the int range
// saturate. Chosen by compares on x, not by clamping it, so no out-of-range value reaches the
// conversion (whose result LLVM leaves undefined, and which it may move before a clamp).
inline Halide::Expr floorToInt32(Halide::Expr x) {
  return Halide::select(isNaN(x), 0, x >= 2147483648.0f, INT32_MAX, x < -2147483648.0f,
                        INT32_MIN, Halide::cast<int32_t>(Halide::floor(x)));
}

} // namespace attnc::halide

#endif // ATTNC_COMPILER_BACKENDS_HALIDE_IEEEFLOAT_H
