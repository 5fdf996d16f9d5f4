// The parts of a bundle's manifest the runtime needs to check a call: target and arguments.
#ifndef ATTNC_RUNTIME_MANIFEST_H
#define ATTNC_RUNTIME_MANIFEST_H

#include "attnc/Shape.hpp"

#include <cstdint>
#include <dlpack/dlpack.h>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attnc::runtime {

enum class ArgumentRole { Input, Output };

struct ArgumentSpec {
  std::string name;
  ArgumentRole role = ArgumentRole::Input;
  std::vector<DLDataType> dtypes; // any of these is accepted
  std::vector<DimExpr> shape;
  // Derived: whether a call writes it, as an output or, with kv_append, as the cache and scales
  // the runtime writes the new rows into; such a tensor must overlap nothing (TensorCheck).
  bool written = false;
};

struct TargetSpec {
  std::string name;                     // "x86-64-avx512", "host", ...
  std::string arch;                     // "x86_64", "aarch64"
  std::string device;                   // "cpu" or "cuda"
  std::string cudaArch;                 // "sm_80", "sm_90": the oldest GPU a cuda bundle runs on
  std::vector<std::string> cpuFeatures; // /proc/cpuinfo flag names the code needs
};

// How the runtime writes a call's new keys and values (k_new, v_new) into its KV cache before the
// kernel runs (the spec key kv_append).
struct KvAppend {
  std::string order;     // the cache's: "bshd", "bhsd" (contiguous), "nhd", "hnd" (paged)
  std::string rowsOrder; // k_new's: "bshd", "bhsd", or "packed" [total_q, H_kv, d]
  int64_t ropeDims = 0;  // 0: no RoPE
  double ropeTheta = 10000;
  bool ropeInterleaved = false;
};

struct RuntimeManifest {
  uint32_t abiVersion = 0;
  // A fat bundle's "targets", best first; else the one "target".
  std::vector<TargetSpec> targets;
  bool fat = false; // the manifest lists "targets" (and the bundle a run function for each)
  std::vector<ArgumentSpec> arguments;
  // A runtime the bundle's code shares with other bundles ("halide-14"); empty when none.
  std::string sharedRuntime;
  std::optional<KvAppend> kvAppend;
  // Derived: whether calls are a ragged batch (an argument shaped "B+1", cu_seqlens_q), and the
  // arguments the kernel takes, in order: all but kv_append's new rows, which the runtime
  // writes into the cache itself.
  bool ragged = false;
  std::vector<size_t> kernelArguments;
  // A backward=true bundle's backward entry: the same targets, its own arguments ("backward"),
  // all passed to the kernel. Null for a bundle without one.
  std::shared_ptr<const RuntimeManifest> backward;
};

// The tensor of the argument named `name` among `tensors` (in manifest order); null when the
// manifest has no such argument.
DLTensor* argumentNamed(const RuntimeManifest& manifest, const std::vector<DLTensor*>& tensors,
                        std::string_view name);

// Throws std::runtime_error naming the field that is missing or malformed.
RuntimeManifest parseRuntimeManifest(std::string_view json);

} // namespace attnc::runtime

#endif // ATTNC_RUNTIME_MANIFEST_H
