// What a --target name asks for, parsed once: the architecture and instruction-set level of
// the CPU code, and the device the kernel runs on (for CUDA, its compute capability). Every
// backend maps a Target to its own terms (a Halide::Target; an LLVM triple, CPU and features),
// and the names are listed here only.
//
//   host                    this machine's architecture and every feature its CPU has
//   x86-64-avx2             Haswell and newer (AVX2, FMA, F16C)
//   x86-64-avx512           Skylake-SP and newer (AVX-512 F/CD/DQ/BW/VL)
//   x86-64-sapphirerapids   AVX-512 with BF16, FP16 and VNNI
//   arm-64-linux            AArch64 with NEON
//   cuda-sm_80, cuda-sm_90  an NVIDIA GPU of that compute capability or newer; the launching
//                           code is for this machine
#ifndef ATTNC_COMPILER_ABI_TARGET_H
#define ATTNC_COMPILER_ABI_TARGET_H

#include <string>
#include <string_view>
#include <vector>

namespace attnc {

enum class Architecture { X86_64, AArch64 };
// Zen4: AVX-512 with AVX512-BF16 dot products and no AMX (AMD Zen 4 and newer).
enum class IsaLevel { Native, Avx2, Avx512, Zen4, SapphireRapids, Neon };
enum class Device { Cpu, Cuda };

struct Target {
  std::string name; // as given
  Architecture architecture;
  IsaLevel isa; // of the CPU code; Native: this machine's (host, and CUDA's launching code)
  Device device;
  int cudaCapability = 0; // Device::Cuda: 80, 90

  bool isCuda() const { return device == Device::Cuda; }
  // "sm_90"; empty for CPU targets.
  std::string cudaArch() const;
  bool operator==(const Target&) const = default;
};

// Throws UsageError naming `name` and listing every known name.
Target parseTarget(const std::string& name);

// Every known name, "host" first.
const std::vector<std::string>& targetNames();

// The architecture this attnc runs on.
Architecture hostArchitecture();

// "x86_64", "aarch64": as manifests and /proc/cpuinfo name them.
std::string_view architectureName(Architecture architecture);

// "cpu", "cuda": as manifests name them.
std::string_view deviceName(Device device);

} // namespace attnc

#endif // ATTNC_COMPILER_ABI_TARGET_H
