// The MLIR backend's schedule: its parameters, their defaults per target family, and the
// transform-dialect script (transform/cpu.mlir) instantiated with them.
#ifndef ATTNC_SCHEDULES_TRANSFORM_TRANSFORMSCHEDULE_H
#define ATTNC_SCHEDULES_TRANSFORM_TRANSFORMSCHEDULE_H

#include "ScheduleParams.h"
#include "Spec/Spec.h"

#include <span>
#include <string>

namespace attnc::mlirschedule {

// The parameters of the MLIR CPU schedule and the values each may take:
//   query_tile    query rows per parallel task (a multiple of vector_width)
//   key_block     keys folded into the online softmax per step (the scores stay in L1)
//   vector_width  f32 lanes per vector (8 for AVX2, 16 for AVX-512, 4 for NEON)
//   key_unroll    keys per register tile of QK^T (query rows are the lanes)
//   value_split   output columns per register tile of PV
std::span<const ParamSpace> mlirParamSpace();

// The default for a target family ("x86-avx512", "x86-avx2", "arm-neon").
ScheduleParams defaultMlirSchedule(const std::string& family, const Spec& spec);

// Throws UsageError when the values do not fit together (query_tile % vector_width).
void checkMlirSchedule(const ScheduleParams& params);

// transform/cpu.mlir with every ${name} replaced by its value.
std::string instantiateCpuSchedule(const ScheduleParams& params);

} // namespace attnc::mlirschedule

#endif // ATTNC_SCHEDULES_TRANSFORM_TRANSFORMSCHEDULE_H
