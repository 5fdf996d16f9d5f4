// The MLIR backend's schedules: their parameters, their defaults per target family, and the
// transform-dialect scripts (transform/cpu.mlir, transform/cuda.mlir) instantiated with them.
#ifndef ATTNC_SCHEDULES_TRANSFORM_TRANSFORMSCHEDULE_H
#define ATTNC_SCHEDULES_TRANSFORM_TRANSFORMSCHEDULE_H

#include "ScheduleFamily.h"
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
//   amx           1: QK^T and PV on AMX tiles (x86-amx only; query_tile a multiple of 16,
//                 key_block of 32)
//   dot           1: QK^T and PV as AVX512-BF16 dot products (x86-avx512-bf16 and x86-amx;
//                 the same tiles as amx)
// The Cuda family (SIMT: one query row per GPU thread) has key_block, key_unroll,
// value_split and
//   block_threads threads per block
//   matmul_mma    1: a variant's operand products on tensor cores (TF32; f16 and bf16 specs)
// The CudaMma family (tensor cores) has
//   query_tile    query rows per block, 16 per warp
//   key_block     keys per K and V tile staged in shared memory
//   max_key_splits, fill_blocks   split-key decoding: blocks per task and the blocks to fill
std::span<const ParamSpace> mlirParamSpace(ScheduleFamily family);

// The parameters `attnc tune` searches for a family and spec: all of them but the CPU
// families' vector_width, which follows the target, and Cuda's matmul_mma, which follows the
// dtype; the backward's (backward_key_block, and backward_dot where the family has pairs) for
// a spec with backward=true only, whose trials time the backward too.
std::vector<ParamSpace> mlirTuningParams(ScheduleFamily family, const Spec& spec);

// The element type of the q, k and v the attention itself reads on a schedule family: the
// spec's dtype for sdpa; where a variant's products make them (mha's projections, bilinear's
// q W, additive's W1 q and W2 k, Linformer's E K and F V, linear attention's feature rows) f32
// on CPUs, since rounding them to bf16 put bilinear (scale 1) past bf16's tolerance (err/tol 1.3
// at H 4/2, d_k 32, T 50), and on GPUs the f16 or bf16 the tensor cores take where they can
// (head dims multiples of 16): mha's and Linformer's in the spec's dtype, bilinear's in f16.
DType attentionOperandDtype(const Spec& spec, ScheduleFamily family);

// The schedule family for a spec on a target family (from the attention's operand dtype): CudaMma
// for f16 and bf16 storage with head dims that are multiples of 16 on CUDA targets; X86Amx and
// X86Avx512Bf16 for bf16 with d_k a multiple of 32 and d_v of 16 on targets with AMX or AVX512-BF16
// (else X86Avx512); else the target family itself.
ScheduleFamily scheduleFamily(ScheduleFamily targetFamily, const Spec& spec);

// The default for a schedule family (X86Avx512, X86Avx512Bf16, X86Amx, X86Avx2, ArmNeon, Cuda,
// CudaMma).
ScheduleParams defaultMlirSchedule(ScheduleFamily family, const Spec& spec);

// Throws UsageError when the values do not fit together (query_tile % vector_width; amx=1
// outside x86-amx, dot=1 outside x86-avx512-bf16 and x86-amx, both, or tiles they cannot
// cover; the shared memory of cuda-mma's K and V tiles).
void checkMlirSchedule(ScheduleFamily family, const ScheduleParams& params, const Spec& spec);

// The family's script (cuda-mma.mlir, cuda.mlir or cpu.mlir) with every placeholder replaced
// by its value.
std::string instantiateSchedule(ScheduleFamily family, const ScheduleParams& params);

} // namespace attnc::mlirschedule

#endif // ATTNC_SCHEDULES_TRANSFORM_TRANSFORMSCHEDULE_H
