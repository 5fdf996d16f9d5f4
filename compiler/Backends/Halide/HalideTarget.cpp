#include "Backends/Halide/HalideTarget.h"

#include "Backends/TargetNames.h"

#include <array>
#include <set>

namespace attnc::halide {
namespace {

using Halide::Target;

struct NamedTarget {
  const char* name;
  const char* halide;
};

constexpr std::array kNamed{
    NamedTarget{"x86-64-avx2", "x86-64-linux-sse41-avx-avx2-f16c-fma"},
    NamedTarget{"x86-64-avx512", "x86-64-linux-sse41-avx-avx2-f16c-fma-avx512-avx512_skylake"},
    NamedTarget{"x86-64-sapphirerapids", "x86-64-linux-sse41-avx-avx2-f16c-fma-avx512-"
                                         "avx512_skylake-avx512_cannonlake-avx512_sapphirerapids"},
    NamedTarget{"arm-64-linux", "arm-64-linux"},
    // Halide 14 knows CUDA capabilities up to 8.6: on sm_90 the driver compiles its PTX.
    NamedTarget{"cuda-sm_80", "host-cuda-cuda_capability_80"},
    NamedTarget{"cuda-sm_90", "host-cuda-cuda_capability_86"},
};

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

std::string familyOf(const Target& t) {
  if (t.has_feature(Target::CUDA))
    return "cuda";
  if (t.arch == Target::ARM)
    return "arm-neon";
  if (t.has_feature(Target::AVX512_Skylake))
    return "x86-avx512";
  return "x86-avx2";
}

std::string archOf(const Target& t) {
  return t.arch == Target::ARM ? "aarch64" : t.arch == Target::X86 ? "x86_64" : "unknown";
}

} // namespace

HalideTarget resolveHalideTarget(const std::string& name) {
  // "host" and the CUDA targets (whose host-side code is for this machine) start from
  // Halide's view of this CPU.
  const char* halideName =
      name == "host" ? "host" : findNamedTarget<NamedTarget>(kNamed, name, "halide").halide;
  Target t(halideName);
  // Halide 14 reports Sapphire Rapids for any CPU with AVX512-BF16 (AMD Zen 4 too), but
  // that level emits AVX512-FP16 instructions, which such CPUs lack.
#if defined(__x86_64__)
  if (std::string_view(halideName).starts_with("host") &&
      t.has_feature(Target::AVX512_SapphireRapids) && !__builtin_cpu_supports("avx512fp16"))
    t = t.without_feature(Target::AVX512_SapphireRapids);
#endif
  const bool cuda = t.has_feature(Target::CUDA);
  HalideTarget result{t,
                      familyOf(t),
                      {name, archOf(t), cuda ? "cuda" : "cpu", cpuFeatures(t),
                       cuda ? name.substr(name.find('-') + 1) : ""},
                      false};
  result.runsHere = result.manifest.arch == hostTarget().arch;
  return result;
}

std::vector<std::string> halideTargetNames() {
  return targetNames<NamedTarget>(kNamed);
}

} // namespace attnc::halide
