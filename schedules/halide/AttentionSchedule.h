// How the Halide attention algorithm runs: loop order, tiling, vectorisation and parallelism,
// all read from ScheduleParams so the autotuner can search them.
#ifndef ATTNC_SCHEDULES_HALIDE_ATTENTIONSCHEDULE_H
#define ATTNC_SCHEDULES_HALIDE_ATTENTIONSCHEDULE_H

#include "ScheduleFamily.h"
#include "ScheduleParams.h"
#include "Spec/Spec.h"
#include "halide/Stages.h"

#include <map>
#include <span>
#include <vector>

namespace attnc::halide {

// The parameters of this backend's schedule and the values each may take:
//   query_tile    query rows per parallel task; the state of that many rows stays in cache
//   key_block     keys merged per step of the online softmax (the algorithm's block)
//   vector_width  f32 lanes per vector (8 for AVX2, 16 for AVX-512, 4 for NEON)
//   key_unroll    keys per register tile of the score GEMM (rows are the vector lanes)
//   row_unroll    query rows per register tile of the PV GEMM (the head dim is the lanes)
//   value_split   head-dim chunk merged at a time, so a V block chunk stays in L1 (0: all)
//   chunk         variant=linear: rows per chunk of the causal prefix sums
std::span<const ParamSpace> halideParamSpace();

// The parameters `attnc tune` searches on a schedule family for `spec`; the others stay at the
// family's default (vector_width follows the target; on Cuda only query_tile and key_block
// matter, and for variant=linear only chunk).
std::vector<ParamSpace> halideTuningParams(ScheduleFamily family, const Spec& spec);

// The default for a schedule family (X86Avx512, X86Avx2, ArmNeon, Cuda) and the spec's head dims,
// carrying the measurement that chose it.
ScheduleParams defaultHalideSchedule(ScheduleFamily family, const Spec& spec);

// Whole schedules `attnc tune` proposes besides its search: the family's default with each of
// Halide 14's autoschedulers (none on Cuda).
std::vector<std::map<std::string, int64_t>> halideAutoscheduledCandidates(ScheduleFamily family,
                                                                          const Spec& spec);

// Throws UsageError naming the parameters when values do not fit together (and with an
// autoscheduler, when attnc's register-tile parameters are not at their defaults): on CPU families
// query_tile must be a multiple of vector_width and row_unroll, key_block of key_unroll; on
// Cuda a block of keys and values must fit in 48 KiB of shared memory as f32.
void checkHalideSchedule(ScheduleFamily family, const ScheduleParams& params, const Spec& spec);

void scheduleAttention(AttentionStages& a, const Spec& spec, const ScheduleParams& params);

// Linear attention's CPU schedule (LinearSchedule.cpp): features and key-value products once per
// call, the chunk sums in parallel, the prefix scan, then each chunk of rows in a task.
void scheduleLinearAttention(LinearStages& a, const Spec& spec, const ScheduleParams& params);

// Register tiles of a Projection: kProjectionRows positions by kProjectionVectors vectors of
// output elements (16 accumulators, enough to hide the FMA latency on two ports), accumulated
// over r; `at` is where the whole product is computed, and its tiles run in parallel when asked.
constexpr int kProjectionRows = 8;
constexpr int kProjectionVectors = 2;
void scheduleProjection(Projection p, int lanes, Halide::LoopLevel at, bool parallel);

// The exact-weights pass (j, i, h, b): rows of each head in parallel, `score` (summed over
// `over`) computed per row with keys in the vector lanes.
void scheduleWeightsPass(Halide::Func weights, Halide::Func score, Halide::RVar over, int lanes);

// The CUDA schedule (family Cuda): query_tile threads per block, one query row per thread,
// key_block keys per online-softmax step staged in shared memory (with the query tile when both
// fit in 48 KiB); the CPU register-tiling parameters are unused.
void scheduleAttentionCuda(AttentionStages& a, const Spec& spec, const ScheduleParams& params);
// checkHalideSchedule's part for Cuda.
void checkCudaSchedule(const ScheduleParams& params, const Spec& spec);

} // namespace attnc::halide

#endif // ATTNC_SCHEDULES_HALIDE_ATTENTIONSCHEDULE_H
