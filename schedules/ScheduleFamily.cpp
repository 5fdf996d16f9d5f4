#include "ScheduleFamily.h"

namespace attnc {

std::string_view scheduleFamilyName(ScheduleFamily family) {
  switch (family) {
  case ScheduleFamily::X86Avx2:
    return "x86-avx2";
  case ScheduleFamily::X86Avx512:
    return "x86-avx512";
  case ScheduleFamily::X86Avx512Bf16:
    return "x86-avx512-bf16";
  case ScheduleFamily::X86Amx:
    return "x86-amx";
  case ScheduleFamily::ArmNeon:
    return "arm-neon";
  case ScheduleFamily::Cuda:
    return "cuda";
  case ScheduleFamily::CudaMma:
    return "cuda-mma";
  }
  return "unknown"; // not reached: every family is named above
}

bool runsOnGpu(ScheduleFamily family) {
  return family == ScheduleFamily::Cuda || family == ScheduleFamily::CudaMma;
}

} // namespace attnc
