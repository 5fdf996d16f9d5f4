#include "Backends/Halide/HalideTarget.h"

#include <set>

namespace attnc::halide {
namespace {

using Halide::Target;

// The Halide target string for an attnc target.
const char* halideName(const attnc::Target& target) {
  if (target.isCuda())
    // Halide 14 knows CUDA capabilities up to 8.6: on sm_90 the driver compiles its PTX.
    return target.cudaCapability >= 86 ? "host-cuda-cuda_capability_86"
                                       : "host-cuda-cuda_capability_80";
  switch (target.isa) {
  case IsaLevel::Native:
    return "host";
  case IsaLevel::Avx2:
    return "x86-64-linux-sse41-avx-avx2-f16c-fma";
  case IsaLevel::Avx512:
    return "x86-64-linux-sse41-avx-avx2-f16c-fma-avx512-avx512_skylake";
  case IsaLevel::Zen4:
    // Halide 14 names no Zen 4 feature; its AVX512-BF16 comes only with Sapphire Rapids'.
    return "x86-64-linux-sse41-avx-avx2-f16c-fma-avx512-avx512_skylake-avx512_cannonlake";
  case IsaLevel::SapphireRapids:
    return "x86-64-linux-sse41-avx-avx2-f16c-fma-avx512-avx512_skylake-avx512_cannonlake-"
           "avx512_sapphirerapids";
  case IsaLevel::Neon:
    return "arm-64-linux";
  }
  return "host"; // not reached: every level is named above
}

// Halide features and the /proc/cpuinfo flags each needs.
std::vector<std::string> cpuFeatures(const Target& t) {
  std::set<std::string> flags;
  auto need = [&](Target::Feature f, std::initializer_list<const char*> names) {
    if (t.has_feature(f))
      flags.insert(names.begin(), names.end());
  };
  need(Target::SSE41, {"sse4_1"});
  need(Target::AVX, {"avx"});
  need(Target::AVX2, {"avx2"});
  need(Target::FMA, {"fma"});
  need(Target::F16C, {"f16c"});
  need(Target::AVX512, {"avx512f", "avx512cd"});
  need(Target::AVX512_Skylake, {"avx512f", "avx512cd", "avx512dq", "avx512bw", "avx512vl"});
  need(Target::AVX512_Cannonlake, {"avx512ifma", "avx512vbmi"});
  // Halide 14's Sapphire Rapids level also turns on AVX512-FP16 code generation.
  need(Target::AVX512_SapphireRapids, {"avx512_bf16", "avx512_vnni", "avx512_fp16"});
  if (t.arch == Target::ARM && t.bits == 64)
    flags.insert("asimd");
  return {flags.begin(), flags.end()};
}

ScheduleFamily familyOf(const Target& t) {
  if (t.has_feature(Target::CUDA))
    return ScheduleFamily::Cuda;
  if (t.arch == Target::ARM)
    return ScheduleFamily::ArmNeon;
  if (t.has_feature(Target::AVX512_Skylake))
    return ScheduleFamily::X86Avx512;
  return ScheduleFamily::X86Avx2;
}

} // namespace

HalideTarget resolveHalideTarget(const attnc::Target& target) {
  // Native levels (host and the CUDA targets, whose host-side code is for this machine) start
  // from Halide's view of this CPU.
  const char* name = halideName(target);
  Target t(name);
  // Halide 14 reports Sapphire Rapids for any CPU with AVX512-BF16 (AMD Zen 4 too), but
  // that level emits AVX512-FP16 instructions, which such CPUs lack.
#if defined(__x86_64__)
  if (std::string_view(name).starts_with("host") &&
      t.has_feature(Target::AVX512_SapphireRapids) && !__builtin_cpu_supports("avx512fp16"))
    t = t.without_feature(Target::AVX512_SapphireRapids);
#endif
  return {t, familyOf(t), {target, cpuFeatures(t)},
          target.architecture == hostArchitecture()};
}

} // namespace attnc::halide
