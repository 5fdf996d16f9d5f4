#include "transform/TransformSchedule.h"

#include "Semantics/PairedProducts.h"
#include "Support/Errors.h"
#include "bundle/MmaContract.h"

#include <algorithm>
#include <regex>

namespace attnc::mlirschedule {
namespace {

// transform/cpu.mlir and cuda.mlir, embedded at build time (CMake writes raw strings).
constexpr const char* kCpuScript =
#include "transform/CpuSchedule.inc"
    ;
constexpr const char* kCpuDecodeScript =
#include "transform/CpuDecodeSchedule.inc"
    ;
constexpr const char* kCudaScript =
#include "transform/CudaSchedule.inc"
    ;
constexpr const char* kCudaMmaScript =
#include "transform/CudaMmaSchedule.inc"
    ;

bool isHalf(DType dtype) {
  return dtype == DType::F16 || dtype == DType::BF16;
}

// mma.sync m16n8k16 takes head dims in steps of 16 (the A fragment's columns, the B tiles').
bool headDimsFitMma(const Spec& spec) {
  return spec.dK % 16 == 0 && spec.dV % 16 == 0;
}

} // namespace

DType attentionOperandDtype(const Spec& spec, ScheduleFamily family) {
  const bool projected = spec.variant == Variant::Mha || spec.variant == Variant::Bilinear ||
                         spec.variant == Variant::Linformer || spec.variant == Variant::Additive ||
                         spec.variant == Variant::Linear;
  if (!projected)
    return spec.dtype;
  // On a GPU, what tensor cores take: mha's and Linformer's in the spec's f16 or bf16, as
  // PyTorch's own projections round them (worst err/tol 0.33 for mha, 0.21 for Linformer on
  // odd shapes, bf16), and bilinear's in f16 only (bf16 failed at scale 1; f16 0.23).
  const bool tensorCores = runsOnGpu(family) && isHalf(spec.dtype) && headDimsFitMma(spec);
  if (tensorCores && (spec.variant == Variant::Mha || spec.variant == Variant::Linformer ||
                      (spec.variant == Variant::Bilinear && spec.dtype == DType::F16)))
    return spec.dtype;
  return DType::F32;
}

namespace {

// The families whose bf16 products go in pairs (AMX tiles or vdpbf16ps): both have vdpbf16ps,
// since MlirTarget picks x86-amx only beside AVX512-BF16.
bool takesBf16Pairs(ScheduleFamily family) {
  return family == ScheduleFamily::X86Avx512Bf16 || family == ScheduleFamily::X86Amx;
}

} // namespace

ScheduleFamily scheduleFamily(ScheduleFamily targetFamily, const Spec& spec) {
  const DType operands = attentionOperandDtype(spec, targetFamily);
  if (targetFamily == ScheduleFamily::Cuda && isHalf(operands) && headDimsFitMma(spec))
    return ScheduleFamily::CudaMma;
  // AMX tiles and vdpbf16ps multiply pairs of bf16 laid out by the kernel: tiles of 32
  // elements of d_k, V transposed 16 columns at a time (PairedOperands.h).
  if (takesBf16Pairs(targetFamily))
    return operands == DType::BF16 && spec.dK % paired::kKeyDims == 0 &&
                   spec.dV % paired::kValueDims == 0
               ? targetFamily
               : ScheduleFamily::X86Avx512;
  return targetFamily;
}

std::span<const ParamSpace> mlirParamSpace(ScheduleFamily family) {
  static const std::vector<ParamSpace> cpu{
      {"query_tile", {8, 12, 16, 24, 32, 48, 64, 96}, "query rows per parallel task"},
      {"key_block", {16, 32, 64, 128, 256, 512}, "keys per online-softmax step"},
      {"backward_key_block",
       {32, 64, 128, 256, 512},
       "backward: keys per block of a task of dK and dV (the query tiles' rows are copied once "
       "per block)"},
      {"vector_width", {4, 8, 16}, "f32 lanes per vector"},
      {"key_unroll", {1, 2, 4, 6, 8}, "keys per QK^T register tile"},
      {"value_split", {1, 2, 4, 8, 16}, "output columns per PV register tile"},
      {"amx", {0, 1}, "1: QK^T and PV on AMX tiles (x86-amx: bf16 on Sapphire Rapids and newer)"},
      {"dot",
       {0, 1},
       "1: QK^T and PV as AVX512-BF16 dot products, vdpbf16ps (x86-avx512-bf16: bf16 on Zen 4; "
       "x86-amx)"},
      {"backward_dot",
       {0, 1},
       "1: the backward's five products as AVX512-BF16 dot products, vdpbf16ps (x86-avx512-bf16 "
       "and x86-amx: the backward has no AMX tiles)"},
      {"decode",
       {0, 1},
       "1: the decode kernel (few query rows: vectors along keys and the head dim, a GQA "
       "group's heads in one task, keys split over tasks and merged)"},
      {"decode_rows", {1, 2, 4, 8, 16}, "decode: query rows of each head per task"},
      {"split_keys", {256, 512, 1024, 2048, 4096}, "decode: keys per split of a task's keys"},
  };
  static const std::vector<ParamSpace> cuda{
      {"key_block", {16, 32, 64, 128, 256}, "keys per online-softmax step"},
      {"key_unroll", {1, 2, 4, 8}, "keys per QK^T register tile of a thread"},
      {"value_split", {1, 2, 4, 8, 16}, "output columns per PV register tile of a thread"},
      {"block_threads", {32, 64, 128, 256, 512}, "threads (query rows) per block"},
      {"matmul_mma",
       {0, 1},
       "1: a variant's operand products (projections, q W, E K, chunk products) on tensor "
       "cores, TF32 mma.sync (f16 and bf16 specs)"},
  };
  static const std::vector<ParamSpace> cudaMma{
      {"query_tile", {16, 32, 64, 128}, "query rows per block, 16 per warp"},
      {"key_block", {16, 32, 64, 128}, "keys per K/V tile in shared memory"},
      {"max_key_splits", {1, 2, 4, 8, 16, 32}, "blocks one task's keys may be split over"},
      {"fill_blocks", {64, 128, 256, 512, 1024}, "blocks the key splits aim to fill the GPU with"},
      {"decode_tile",
       {16, 32, 64},
       "rows per block when Tq <= 16: rows / G query rows of each of a GQA group's G heads"},
      {"decode_key_block", {16, 32, 64, 128}, "keys per K/V tile when Tq <= 16"},
  };
  switch (family) {
  case ScheduleFamily::X86Avx2:
  case ScheduleFamily::X86Avx512:
  case ScheduleFamily::X86Avx512Bf16:
  case ScheduleFamily::X86Amx:
  case ScheduleFamily::ArmNeon:
    return cpu;
  case ScheduleFamily::Cuda:
    return cuda;
  case ScheduleFamily::CudaMma:
    return cudaMma;
  }
  return cpu; // not reached: every family is named above
}

std::vector<ParamSpace> mlirTuningParams(ScheduleFamily family, const Spec& spec) {
  std::vector<ParamSpace> tuned;
  // The decode kernel is picked by the shape dispatch, not searched with the prefill kernel's
  // parameters; AMX tiles and dot products only where the family has them (vdpbf16ps is
  // searched where it is the fastest product, not beside AMX); the backward's parameters only
  // where attnc tune times the backward.
  for (const ParamSpace& p : mlirParamSpace(family))
    if (p.name != "vector_width" && p.name != "decode" && p.name != "decode_rows" &&
        p.name != "split_keys" && p.name != "matmul_mma" &&
        (p.name != "backward_key_block" || spec.backward) &&
        (p.name != "backward_dot" || (spec.backward && takesBf16Pairs(family))) &&
        (p.name != "amx" || family == ScheduleFamily::X86Amx) &&
        (p.name != "dot" || family == ScheduleFamily::X86Avx512Bf16))
      tuned.push_back(p);
  return tuned;
}

namespace {

// The decode kernel's query rows per head in a task: 16 / G for GQA groups of G <= 2 heads, 4
// for larger ones, so a task holds 16 rows or more and a step of up to that many rows per head
// (the shape dispatch's decode kernel runs Tq <= 16) reads K and V once: H 8, d 128, f16, Tk 16k,
// Tq 16 1.6x as fast as tasks of 4 rows (docs/benchmarks.md, "Decode").
int64_t decodeRows(const Spec& spec) {
  return spec.groupSize() == 1 ? 16 : spec.groupSize() == 2 ? 8 : 4;
}

// The query tile for a mask of row blocks (BigBird, block_sparse): the largest multiple of the
// vector width up to `widest` that divides the pattern's block, so no tile straddles two row
// blocks. The tile classifier (ExpressionBounds.h) then sees one row block per tile, where the
// pattern is a point it can evaluate: BigBird's random blocks and block_sparse's layout skip
// every dead chunk of keys. H 8, d 64, T 2048, block 64: 32-row tiles ran BigBird 2.9x and
// causal+block_sparse 1.7x as fast as 48-row ones (docs/benchmarks.md).
int64_t queryTile(const Spec& spec, int64_t widest, int64_t lanes) {
  if (!spec.masks.has(MaskKind::BigBird) && !spec.masks.has(MaskKind::BlockSparse))
    return widest;
  for (int64_t rows = widest; rows >= lanes; rows -= lanes)
    if (spec.block % rows == 0)
      return rows;
  return widest;
}

} // namespace

ScheduleParams defaultMlirSchedule(ScheduleFamily family, const Spec& spec) {
  // Register budgets: the QK^T tile holds key_unroll x (query_tile / vector_width)
  // accumulators plus the query vectors and a broadcast; the PV tile value_split x the same.
  // AVX-512 and NEON have 32 vector registers (3 x 8 + 3 + 1 = 28), AVX2 16 (2 x 6 + 2 + 1).
  // x86-amx: the same tiles, with QK^T and PV on AMX (3 row tiles of S^T and O^T at once);
  // x86-avx512-bf16: with them as vdpbf16ps, two keys or head dims per product, and PV's tile
  // of 4 columns: vdpbf16ps takes no broadcast operand from memory where it is used thrice,
  // and 8 broadcasts beside 24 accumulators spilled (H 8, d 128, T 2048: the same speed on
  // the Xeon of docs/benchmarks.md, 28 more instructions in the loop).
  // f32: tiles of 32 rows. S of 128 keys x 48 rows takes 24 KiB of a 32 KiB L1 (Zen 4) beside
  // the f32 K and V rows PV streams; at 32 rows (16 KiB) H 8, T 2048 ran 1.15x as fast at d 64
  // and 128, causal too, where f16 ran 0.92x and bf16's products the same (docs/benchmarks.md;
  // not measured on a 48 KiB L1). Their QK^T tiles take 4 keys: 1.025-1.03x as fast as 8 at d 64
  // and 128, causal too (H 8, T 2048, 1 thread, the Zen 4 EPYC, 10 processes each).
  // The backward's key blocks on AVX2: 512 keys, so that each query tile's rows are copied
  // and packed once per 512 keys, not per 128. H 8, T 2048, 1 thread, a Zen 3 EPYC, medians
  // of 6 processes alternated: d 128, 256 keys 0.86x the time of 128 (621 against 718 ms) and
  // 512 0.96x that of 256; d 64 0.96x and 0.94x; causal d 128 0.92x, then level; causal d 64
  // level; B H = 1 causal on 2 threads, 512 against 128, level. The block's dK, dV, K^T and
  // V^T buffers go to the heap past the stack's budget (attn-outline-tasks). AVX-512's stay at
  // 128 keys: not measured.
  if (family == ScheduleFamily::X86Avx512 || family == ScheduleFamily::X86Avx512Bf16 ||
      family == ScheduleFamily::X86Amx) {
    const bool smallTiles = attentionOperandDtype(spec, family) == DType::F32;
    return ScheduleParams("mlir",
                          {{"query_tile", queryTile(spec, smallTiles ? 32 : 48, 16)},
                           {"key_block", 128},
                           {"backward_key_block", 128},
                           {"vector_width", 16},
                           {"key_unroll", smallTiles ? 4 : 8},
                           {"value_split", family == ScheduleFamily::X86Avx512Bf16 ? 4 : 8},
                           {"amx", family == ScheduleFamily::X86Amx ? 1 : 0},
                           {"dot", family == ScheduleFamily::X86Avx512Bf16 ? 1 : 0},
                           {"backward_dot", takesBf16Pairs(family) ? 1 : 0},
                           {"decode", 0},
                           {"decode_rows", decodeRows(spec)},
                           {"split_keys", 512}},
                          smallTiles ? "register budget of 32 zmm; f32 tiles of 32 rows keep S "
                                       "(16 KiB) and the K/V rows in a 32 KiB L1"
                                     : "register budget of 32 zmm; key_block 128 keeps S (24 KiB) "
                                       "in L1");
  }
  if (family == ScheduleFamily::X86Avx2)
    return ScheduleParams("mlir",
                          {{"query_tile", queryTile(spec, 16, 8)},
                           {"key_block", 128},
                           {"backward_key_block", 512},
                           {"vector_width", 8},
                           {"key_unroll", 6},
                           {"value_split", 4},
                           {"amx", 0},
                           {"dot", 0},
                           {"backward_dot", 0},
                           {"decode", 0},
                           {"decode_rows", decodeRows(spec)},
                           {"split_keys", 512}},
                          "register budget of 16 ymm");
  if (family == ScheduleFamily::CudaMma) {
    // A thread holds O (d_v / 2 floats), Q's fragments (d_k / 4 registers) and S (key_block
    // / 2 floats) at once; these key blocks keep that within 255 registers without spills by
    // ptxas for sm_80 and sm_90 at d <= 128 (d = 256 spills 160 bytes). K and V tiles of
    // key_block x (d + 8) elements fit 48 KiB of static shared memory. The backward's dK/dV
    // kernel holds dK and dV (d / 2 floats each), K's and V's fragments and S^T and dP^T: at
    // d 128 it spills about 100 bytes (ptxas sm_80; more with dropout's Philox), not measured
    // against smaller blocks on a GPU yet.
    const int64_t widest = std::max(spec.dK, spec.dV);
    const int64_t keyBlock = widest <= 64 ? 64 : widest <= 128 ? 32 : 16;
    // Key splits: about four blocks per SM of an A100 (108) or H100/H200 (132), so that a
    // decoding step keeps enough K/V tiles in flight. Decoding steps (Tq <= 16) take tiles of
    // the query rows of a whole GQA group, so each K/V byte is read once per KV head: 2 warps
    // and 32 keys. H200, B 8, H 32/8, d 128, f16, contiguous cache, Tk 16k (docs/benchmarks.md,
    // "GPU"): 0.311 ms at 256 blocks, 0.266 at 512, 0.288 at 1024; 4 warps 0.348; 1 warp and
    // 16 keys 0.464; 1 warp and 64 keys (768 bytes of spills) 1.00. Quantized rows, which the
    // threads load and decode themselves, take 16 keys (32 spill 100-200 bytes): int8
    // contiguous 0.456 ms against 0.762, paged 0.920 against 0.975.
    const int64_t decodeTile = std::max<int64_t>(32, (spec.groupSize() + 15) / 16 * 16);
    const int64_t decodeKeyBlock =
        widest <= 128 && spec.kvDtype == KvDType::Same ? 32 : 16;
    return ScheduleParams("mlir",
                          {{"query_tile", 64},
                           {"key_block", keyBlock},
                           {"max_key_splits", 16},
                           {"fill_blocks", 512},
                           {"decode_tile", decodeTile},
                           {"decode_key_block", decodeKeyBlock}},
                          "4 warps of 16 query rows; registers without spills (ptxas); key "
                          "splits for about four blocks per SM; decode tiles of a GQA group "
                          "(H200)");
  }
  if (family == ScheduleFamily::Cuda)
    return ScheduleParams("mlir",
                          {{"key_block", 64},
                           {"key_unroll", 4},
                           {"value_split", 8},
                           {"block_threads", 128},
                           {"matmul_mma", spec.dtype == DType::F32 ? 0 : 1}},
                          "first SIMT schedule, one query row per thread; a variant's products "
                          "on tensor cores for f16 and bf16 (not measured)");
  return ScheduleParams("mlir",
                        {{"query_tile", queryTile(spec, 12, 4)},
                         {"key_block", 128},
                         {"backward_key_block", 128},
                         {"vector_width", 4},
                         {"key_unroll", 8},
                         {"value_split", 8},
                         {"amx", 0},
                         {"dot", 0},
                         {"backward_dot", 0},
                         {"decode", 0},
                         {"decode_rows", decodeRows(spec)},
                         {"split_keys", 512}},
                        "register budget of 32 NEON q registers (not measured)");
}

namespace {

// vdpbf16ps (dot=1, backward_dot=1): in the families whose specs' bf16 operands pair.
void checkDotFamily(const char* name, ScheduleFamily family) {
  if (!takesBf16Pairs(family))
    throw UsageError("schedule: " + std::string(name) +
                     " needs the x86-avx512-bf16 or x86-amx family: a bf16 spec with d_k a "
                     "multiple of 32 and d_v of 16 on a target with AVX512-BF16 (x86-64-zen4, "
                     "x86-64-sapphirerapids, or host on such a CPU); this is " +
                     std::string(scheduleFamilyName(family)));
}

// The backward's dot products (a spec without a backward has none to check): 16 query rows a
// vector (its key blocks are multiples of 32 keys by their parameter space), apart from the
// forward's products, so that the x86-amx family's backward takes them beside the forward's
// AMX tiles.
void checkBackwardDot(ScheduleFamily family, const ScheduleParams& params) {
  if (params.get("backward_dot") != 1)
    return;
  checkDotFamily("backward_dot=1", family);
  if (params.get("vector_width") != 16)
    throw UsageError("schedule: backward_dot=1 needs vector_width=16; got vector_width=" +
                     std::to_string(params.get("vector_width")));
}

} // namespace

void checkMlirSchedule(ScheduleFamily family, const ScheduleParams& params, const Spec& spec) {
  if (family == ScheduleFamily::Cuda) {
    // One query row per thread: nothing to divide. TF32 rounds an f32 operand at 2^-11, past
    // the tolerance of an f32 result (PyTorch's allow_tf32 is off by default for the same
    // reason).
    if (params.get("matmul_mma") == 1 && spec.dtype == DType::F32)
      throw UsageError("schedule: matmul_mma=1 takes the products in TF32, which rounds f32 "
                       "operands past an f32 spec's tolerance; it serves dtype=f16 and "
                       "dtype=bf16 (use matmul_mma=0)");
    return;
  }
  if (family == ScheduleFamily::CudaMma) {
    for (const char* name : {"key_block", "decode_key_block"}) {
      // The decode tiles stage quantized rows' scales beside K and V, the backward's dK/dV
      // kernel its query rows' lse and D beside Q and dO (as many bytes).
      const bool scales =
          name == std::string("decode_key_block") ? spec.kvDtype != KvDType::Same : spec.backward;
      const int64_t bytes = attn::mmaSharedBytes(params.get(name), spec.dK, spec.dV, 2, scales);
      if (bytes > attn::kMmaSharedLimit)
        throw UsageError("schedule: " + std::string(name) + "=" +
                         std::to_string(params.get(name)) + " needs " + std::to_string(bytes) +
                         " bytes of shared memory for K and V tiles at d_k=" +
                         std::to_string(spec.dK) + ", d_v=" + std::to_string(spec.dV) +
                         "; at most " + std::to_string(attn::kMmaSharedLimit) + " (a smaller " +
                         name + ")");
    }
    if (params.get("decode_tile") < spec.groupSize())
      throw UsageError("schedule: decode_tile=" + std::to_string(params.get("decode_tile")) +
                       " rows cannot hold a row of each of the GQA group's " +
                       std::to_string(spec.groupSize()) + " heads (at least " +
                       std::to_string(spec.groupSize()) + ")");
    return;
  }
  if (params.get("query_tile") % params.get("vector_width") != 0)
    throw UsageError(
        "schedule: query_tile=" + std::to_string(params.get("query_tile")) +
        " must be a multiple of vector_width=" + std::to_string(params.get("vector_width")));
  if (spec.backward)
    checkBackwardDot(family, params);
  const bool amx = params.get("amx") == 1, dot = params.get("dot") == 1;
  if (!amx && !dot)
    return;
  if (amx && dot)
    throw UsageError("schedule: amx=1 and dot=1 are two ways of taking the same products; "
                     "choose one");
  const char* name = amx ? "amx=1" : "dot=1";
  if (amx && family != ScheduleFamily::X86Amx)
    throw UsageError("schedule: amx=1 needs the x86-amx family: a bf16 spec with d_k a multiple "
                     "of 32 and d_v of 16 on a target with AMX (x86-64-sapphirerapids, or host "
                     "on such a CPU); this is " +
                     std::string(scheduleFamilyName(family)));
  if (dot)
    checkDotFamily("dot=1", family);
  // Both take 16 query rows a vector or tile (an AMX tile holds 16 rows of 16 f32: S^T and
  // O^T) and pairs of keys laid out in chunks of 32 (PairedOperands.h).
  if (params.get("query_tile") % 16 != 0 || params.get("key_block") % 32 != 0 ||
      params.get("vector_width") != 16)
    throw UsageError("schedule: " + std::string(name) +
                     " needs query_tile a multiple of 16, key_block a multiple "
                     "of 32 and vector_width=16; got query_tile=" +
                     std::to_string(params.get("query_tile")) +
                     ", key_block=" + std::to_string(params.get("key_block")) +
                     ", vector_width=" + std::to_string(params.get("vector_width")));
}

std::string instantiateSchedule(ScheduleFamily family, const ScheduleParams& params) {
  static const std::regex placeholder(R"(\$\{([a-z_]+)\})");
  std::string script = family == ScheduleFamily::CudaMma ? kCudaMmaScript
                       : family == ScheduleFamily::Cuda  ? kCudaScript
                       : params.get("decode") == 1       ? kCpuDecodeScript
                                                         : kCpuScript;
  std::string out;
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
