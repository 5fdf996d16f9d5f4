// IEEE binary16 and bfloat16 to and from double, rounding to nearest even in one step.
#ifndef ATTNC_COMPILER_SUPPORT_FLOAT16_H
#define ATTNC_COMPILER_SUPPORT_FLOAT16_H

#include <cstdint>

namespace attnc {

double halfToDouble(uint16_t bits);
double bfloat16ToDouble(uint16_t bits);
// Round x once to the nearest representable value (ties to even); overflow gives infinity.
uint16_t doubleToHalf(double x);
uint16_t doubleToBfloat16(double x);

} // namespace attnc

#endif // ATTNC_COMPILER_SUPPORT_FLOAT16_H
