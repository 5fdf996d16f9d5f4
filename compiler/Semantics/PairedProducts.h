// The CPU kernels' bf16 products in pairs: AMX tiles (tdpbf16ps) and AVX512-BF16 dot products
// (vdpbf16ps) multiply two bf16 pairs and add both products to an f32 accumulator. Q and P
// are rounded to bf16 for them (FlashAttention's precision: max, sum and output stay f32).
#ifndef ATTNC_COMPILER_SEMANTICS_PAIREDPRODUCTS_H
#define ATTNC_COMPILER_SEMANTICS_PAIREDPRODUCTS_H

#include <cstdint>

namespace attnc::paired {

// The head dims whose products the kernels take in pairs: d_k in whole AMX tile rows of 32
// bf16, d_v in whole 16-column steps of V's transposition (dialects' PairedOperands.h). The
// schedule family follows them (mlirschedule::scheduleFamily); the lowering checks them again.
inline constexpr int64_t kKeyDims = 32, kValueDims = 16;

} // namespace attnc::paired

#endif // ATTNC_COMPILER_SEMANTICS_PAIREDPRODUCTS_H
