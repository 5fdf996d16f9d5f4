// A schedule family is the set of default schedules and parameter spaces a target's code gets:
// on CPUs, one per vector width (AVX2, AVX-512, NEON), and AVX-512 with AVX512-BF16 dot products
// or with AMX tiles for the bf16 kernels whose products they take (only the MLIR backend has
// those two); on CUDA, the GPU's SIMT
// schedule (one query row per thread) or its tensor-core (MMA) schedule, which only the MLIR
// backend has (mlirschedule::scheduleFamily picks it for the spec).
#ifndef ATTNC_SCHEDULES_SCHEDULEFAMILY_H
#define ATTNC_SCHEDULES_SCHEDULEFAMILY_H

#include <string_view>

namespace attnc {

enum class ScheduleFamily { X86Avx2, X86Avx512, X86Avx512Bf16, X86Amx, ArmNeon, Cuda, CudaMma };

// The family's name as users see it (x86-avx2, x86-avx512, x86-avx512-bf16, x86-amx, arm-neon,
// cuda, cuda-mma), e.g. in the MLIR backend's schedule diagnostics.
std::string_view scheduleFamilyName(ScheduleFamily family);

// Whether the family's code runs on a GPU (Cuda, CudaMma).
bool runsOnGpu(ScheduleFamily family);

} // namespace attnc

#endif // ATTNC_SCHEDULES_SCHEDULEFAMILY_H
