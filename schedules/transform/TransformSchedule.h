// The MLIR backend's schedules: their parameters, their defaults per target family, and the
// transform-dialect scripts (transform/cpu.mlir, transform/cuda.mlir) instantiated with them.
#ifndef ATTNC_SCHEDULES_TRANSFORM_TRANSFORMSCHEDULE_H
#define ATTNC_SCHEDULES_TRANSFORM_TRANSFORMSCHEDULE_H

#include "ScheduleParams.h"
#include "Spec/Spec.h"

#include <span>
#include <string>

namespace attnc::mlirschedule {

// The parameters of an MLIR schedule and the values each may take. CPU families:
//   query_tile    query rows per parallel task (a multiple of vector_width)
//   key_block     keys folded into the online softmax per step (the scores stay in L1)
//   vector_width  f32 lanes per vector (8 for AVX2, 16 for AVX-512, 4 for NEON)
//   key_unroll    keys per register tile of QK^T (query rows are the lanes)
//   value_split   output columns per register tile of PV
// The "cuda" family (one query row per GPU thread) has key_block, key_unroll, value_split and
//   block_threads threads per block
std::span<const ParamSpace> mlirParamSpace(const std::string& family);

// The default for a target family ("x86-avx512", "x86-avx2", "arm-neon", "cuda").
ScheduleParams defaultMlirSchedule(const std::string& family, const Spec& spec);

// Throws UsageError when the values do not fit together (query_tile % vector_width).
void checkMlirSchedule(const std::string& family, const ScheduleParams& params);

// The family's script (cuda.mlir for "cuda", else cpu.mlir) with every placeholder replaced
// by its value.
std::string instantiateSchedule(const std::string& family, const ScheduleParams& params);

} // namespace attnc::mlirschedule

#endif // ATTNC_SCHEDULES_TRANSFORM_TRANSFORMSCHEDULE_H
