// The MLIR backend's schedules: their parameters, their defaults per target family, and the
// transform-dialect scripts (transform/cpu.mlir, transform/cuda.mlir) instantiated with them.
#ifndef ATTNC_SCHEDULES_TRANSFORM_TRANSFORMSCHEDULE_H
#define ATTNC_SCHEDULES_TRANSFORM_TRANSFORMSCHEDULE_H

#include "ScheduleParams.h"
#include "Spec/Spec.h"

#include <span>
#include <string>
#include <vector>

namespace attnc::mlirschedule {

// The parameters of an MLIR schedule and the values each may take. CPU families:
//   query_tile    query rows per parallel task (a multiple of vector_width)
//   key_block     keys folded into the online softmax per step (the scores stay in L1)
//   vector_width  f32 lanes per vector (8 for AVX2, 16 for AVX-512, 4 for NEON)
//   key_unroll    keys per register tile of QK^T (query rows are the lanes)
//   value_split   output columns per register tile of PV
// The "cuda" family (SIMT: one query row per GPU thread) has key_block, key_unroll,
// value_split and
//   block_threads threads per block
// The "cuda-mma" family (tensor cores) has
//   query_tile    query rows per block, 16 per warp
//   key_block     keys per K and V tile staged in shared memory
//   max_key_splits, fill_blocks   split-key decoding: blocks per task and the blocks to fill
std::span<const ParamSpace> mlirParamSpace(const std::string& family);

// The parameters `attnc tune` searches for a family: all of them but the CPU families'
// vector_width, which follows the target.
std::vector<ParamSpace> mlirTuningParams(const std::string& family);

// The schedule family for a spec on a target family: "cuda-mma" for f16 and bf16 storage with
// head dims that are multiples of 16 on CUDA targets, else the target family itself.
std::string scheduleFamily(const std::string& targetFamily, const Spec& spec);

// The default for a target family ("x86-avx512", "x86-avx2", "arm-neon", "cuda").
ScheduleParams defaultMlirSchedule(const std::string& family, const Spec& spec);

// Throws UsageError when the values do not fit together (query_tile % vector_width; the
// shared memory of cuda-mma's K and V tiles).
void checkMlirSchedule(const std::string& family, const ScheduleParams& params, const Spec& spec);

// The family's script (cuda-mma.mlir, cuda.mlir or cpu.mlir) with every placeholder replaced
// by its value.
std::string instantiateSchedule(const std::string& family, const ScheduleParams& params);

} // namespace attnc::mlirschedule

#endif // ATTNC_SCHEDULES_TRANSFORM_TRANSFORMSCHEDULE_H
