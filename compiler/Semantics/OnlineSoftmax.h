// The online softmax's one numerical convention that every code generator shares.
#ifndef ATTNC_COMPILER_SEMANTICS_ONLINESOFTMAX_H
#define ATTNC_COMPILER_SEMANTICS_ONLINESOFTMAX_H

namespace attnc::softmax {

// Kernels accumulate A = Σ_j p_j v_j and L = Σ_j p_j in f32 with p_j = exp(s_j - m) ≤ 1, so A
// reaches Tk · max|v| and overflows for values near f32's maximum although o = A / L is a
// weighted mean of them. Every p_j is therefore formed as exp(s_j - m - c) with e^c ≥ Tk for
// every Tk a spec allows (2^31): A ≤ max|v| and L ≤ 1. o = A / L is unchanged (the factor e^-c
// cancels), lse = m + c + log L, and the merges of partial states, which scale by e^(m_i - m),
// are unchanged too. The price is c/ln 2 = 31 of f32's 254 binary orders of magnitude at the
// small end: p_j v_j underflows for |v| below about 1e-29 instead of 1e-38.
inline constexpr double kProbabilityShift = 21.487562597358306; // ln 2^31

// The shift of a kernel that rounds p_j to its storage type for the PV product (tensor cores):
// none for f16, whose smallest subnormal 2^-24 lies above every p_j ≤ 2^-31 and whose values
// (≤ 65504) cannot overflow an f32 sum of 2^31 terms anyway; bf16 has f32's range.
inline constexpr double probabilityShiftFor(bool probabilitiesRoundedToF16) {
  return probabilitiesRoundedToF16 ? 0.0 : kProbabilityShift;
}

} // namespace attnc::softmax

#endif // ATTNC_COMPILER_SEMANTICS_ONLINESOFTMAX_H
