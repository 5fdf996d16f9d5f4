#include "transform/TransformSchedule.h"

#include "Support/Errors.h"

#include <regex>

namespace attnc::mlirschedule {
namespace {

// transform/cpu.mlir and cuda.mlir, embedded at build time (CMake writes raw strings).
constexpr const char* kCpuScript =
#include "transform/CpuSchedule.inc"
    ;
constexpr const char* kCudaScript =
#include "transform/CudaSchedule.inc"
    ;

} // namespace

std::span<const ParamSpace> mlirParamSpace(const std::string& family) {
  static const std::vector<ParamSpace> cpu{
      {"query_tile", {8, 12, 16, 24, 32, 48, 64, 96}, "query rows per parallel task"},
      {"key_block", {16, 32, 64, 128, 256, 512}, "keys per online-softmax step"},
      {"vector_width", {4, 8, 16}, "f32 lanes per vector"},
      {"key_unroll", {1, 2, 4, 6, 8}, "keys per QK^T register tile"},
      {"value_split", {1, 2, 4, 8, 16}, "output columns per PV register tile"},
  };
  static const std::vector<ParamSpace> cuda{
      {"key_block", {16, 32, 64, 128, 256}, "keys per online-softmax step"},
      {"key_unroll", {1, 2, 4, 8}, "keys per QK^T register tile of a thread"},
      {"value_split", {1, 2, 4, 8, 16}, "output columns per PV register tile of a thread"},
      {"block_threads", {32, 64, 128, 256, 512}, "threads (query rows) per block"},
  };
  return family == "cuda" ? cuda : cpu;
}

ScheduleParams defaultMlirSchedule(const std::string& family, const Spec& spec) {
  // Register budgets: the QK^T tile holds key_unroll x (query_tile / vector_width)
  // accumulators plus the query vectors and a broadcast; the PV tile value_split x the same.
  // AVX-512 and NEON have 32 vector registers (3 x 8 + 3 + 1 = 28), AVX2 16 (2 x 6 + 2 + 1).
  if (family == "x86-avx512")
    return ScheduleParams("mlir",
                          {{"query_tile", 48},
                           {"key_block", 128},
                           {"vector_width", 16},
                           {"key_unroll", 8},
                           {"value_split", 8}},
                          "register budget of 32 zmm; key_block 128 keeps S (24 KiB) in L1");
  if (family == "x86-avx2")
    return ScheduleParams("mlir",
                          {{"query_tile", 16},
                           {"key_block", 128},
                           {"vector_width", 8},
                           {"key_unroll", 6},
                           {"value_split", 4}},
                          "register budget of 16 ymm");
  if (family == "cuda")
    return ScheduleParams(
        "mlir", {{"key_block", 64}, {"key_unroll", 4}, {"value_split", 8}, {"block_threads", 128}},
        "first SIMT schedule, one query row per thread (not measured)");
  return ScheduleParams("mlir",
                        {{"query_tile", 12},
                         {"key_block", 128},
                         {"vector_width", 4},
                         {"key_unroll", 8},
                         {"value_split", 8}},
                        "register budget of 32 NEON q registers (not measured)");
}

void checkMlirSchedule(const std::string& family, const ScheduleParams& params) {
  if (family == "cuda")
    return; // one query row per thread: nothing to divide
  if (params.get("query_tile") % params.get("vector_width") != 0)
    throw UsageError(
        "schedule: query_tile=" + std::to_string(params.get("query_tile")) +
        " must be a multiple of vector_width=" + std::to_string(params.get("vector_width")));
}

std::string instantiateSchedule(const std::string& family, const ScheduleParams& params) {
  static const std::regex placeholder(R"(\$\{([a-z_]+)\})");
  std::string script = family == "cuda" ? kCudaScript : kCpuScript, out;
  auto end = std::sregex_iterator();
  size_t last = 0;
  for (auto it = std::sregex_iterator(script.begin(), script.end(), placeholder); it != end; ++it) {
    out += script.substr(last, it->position() - last);
    out += std::to_string(params.get((*it)[1].str()));
    last = it->position() + it->length();
  }
  return out + script.substr(last);
}

} // namespace attnc::mlirschedule
