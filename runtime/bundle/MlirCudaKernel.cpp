// The kernel entry of MLIR CUDA bundles, and the mgpu* functions the generated host code calls
// (gpu-to-llvm's runtime interface), implemented on the CUDA driver loaded at run time.
//
// The generated _mlir_ciface_attnc_mlir_kernel(Memref *arg0, ...), called through its packed
// interface (MemrefCall.h), loads the embedded PTX (mgpuModuleLoadJIT), looks the kernel up,
// launches it on "its" stream and synchronizes it.
// Here that stream is the caller's (attnc_run_options.stream, or the default stream) and is
// left running, modules are loaded once per process, and the first driver error of a run
// (loading, launching) is reported by attnc_kernel_run.
//
// A backward=true bundle also holds the backward kernel, attnc_mlir_backward (MmaBackward.cpp),
// with its own shape contract and aligned arguments; the call's entry picks one. Those symbols
// are weak: a forward-only bundle has none.
#include "CallCheck.h"
#include "MemrefCall.h"
#include "MmaContract.h"
#include "ShapeContract.h"
#include "attnc/CudaDriver.hpp"
#include "attnc/attnc.h"

#include <cstdio>
#include <map>
#include <mutex>
#include <string>

extern "C" {
void attnc_mlir_kernel_packed(void**); // MemrefCall.h
extern const char attnc_mlir_kernel_shapes[]; // bundle/ShapeContract.h
// Tensor-core kernels only: which arguments need aligned rows (MmaContract.h).
// Weak and hidden: the bundle's own definitions or null, never another library's.
extern const int32_t attnc_mma_aligned_args __attribute__((weak, visibility("hidden")));
void attnc_mlir_backward_packed(void**) __attribute__((weak, visibility("hidden")));
extern const char attnc_mlir_backward_shapes[] __attribute__((weak, visibility("hidden")));
extern const int32_t attnc_mma_backward_aligned_args __attribute__((weak, visibility("hidden")));
__attribute__((visibility("protected"))) int32_t
attnc_kernel_run(const attnc_kernel_call* call, char* message, size_t messageSize);
}

namespace {

using namespace attnc::cuda;

// What the mgpu* calls of the current run need: the driver, the stream, the first error.
struct RunState {
  const Driver* driver;
  CUstream stream;
  std::string error;
};
thread_local RunState* current = nullptr;

bool check(CUresult result, const char* what) {
  if (result == kSuccess || !current)
    return result == kSuccess;
  if (current->error.empty())
    current->error = std::string(what) + " failed: " + errorText(*current->driver, result);
  return false;
}

// Loads `image` (PTX text or a cubin) once per process, with the JIT's error log on failure.
CUmodule loadOnce(const void* image, int optLevel) {
  static std::mutex mutex;
  static std::map<const void*, CUmodule> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = loaded.find(image); it != loaded.end())
    return it->second;
  char log[8192] = {};
  int options[] = {kJitErrorLogBuffer, kJitErrorLogBufferSize, kJitOptimizationLevel};
  void* values[] = {log, reinterpret_cast<void*>(sizeof log),
                    reinterpret_cast<void*>(static_cast<intptr_t>(optLevel))};
  CUmodule module = nullptr;
  CUresult result = current->driver->cuModuleLoadDataEx(&module, image, 3, options, values);
  if (result != kSuccess) {
    if (current->error.empty())
      current->error = "loading the kernel's PTX failed: " + errorText(*current->driver, result) +
                       (log[0] ? std::string("; JIT log: ") + log : "");
    return nullptr;
  }
  loaded[image] = module;
  return module;
}

// Whether the tensors a tensor-core kernel copies by 16-byte chunks allow it: a unit innermost
// stride, every other stride a multiple of 16 bytes and a 16-byte aligned start.
// `alignedArgs` is the kernel's mask (MmaContract.h), null for a SIMT kernel.
bool alignedForMma(const attnc_kernel_call& call, const int32_t* alignedArgs, char* message,
                   size_t messageSize) {
  static_assert(attnc::attn::kMmaAlignedArgsSymbol == std::string_view("attnc_mma_aligned_args"));
  static_assert(attnc::attn::kMmaBackwardAlignedArgsSymbol ==
                std::string_view("attnc_mma_backward_aligned_args"));
  if (!alignedArgs)
    return true;
  constexpr int64_t align = attnc::attn::kMmaAlignBytes;
  for (uint32_t a = 0; a < call.num_args; ++a) {
    if (!(*alignedArgs >> a & 1))
      continue;
    const DLTensor& t = *call.args[a];
    const int64_t bytes = t.dtype.bits / 8;
    bool ok = (reinterpret_cast<uintptr_t>(t.data) + t.byte_offset) % align == 0;
    for (int k = 0; k < t.ndim && t.strides; ++k)
      ok = ok && (k + 1 == t.ndim ? t.strides[k] == 1 : t.strides[k] * bytes % align == 0);
    if (!ok) {
      std::snprintf(message, messageSize,
                    "kernel argument %u: this tensor-core kernel needs the head dimension contiguous "
                    "(stride 1), the other strides multiples of %lld bytes and the data "
                    "%lld-byte aligned",
                    a, static_cast<long long>(align), static_cast<long long>(align));
      return false;
    }
  }
  return true;
}

} // namespace

extern "C" {

void* mgpuModuleLoad(void* data, size_t) {
  return loadOnce(data, 3);
}

void* mgpuModuleLoadJIT(void* data, int optLevel) {
  return loadOnce(data, optLevel);
}

void mgpuModuleUnload(void*) {} // modules stay loaded for the next run

void* mgpuModuleGetFunction(void* module, const char* name) {
  CUfunction function = nullptr;
  if (module)
    check(current->driver->cuModuleGetFunction(&function, static_cast<CUmodule>(module), name),
          "cuModuleGetFunction");
  return function;
}

void* mgpuStreamCreate() {
  return current->stream;
}

void mgpuStreamDestroy(void*) {}

// Workspace of split-key kernels and of a kernel's phases (RoPE's rotated q and k; gpu.alloc /
// gpu.dealloc): stream-ordered, so it costs no synchronization and comes from the driver's pool
// after the first run.
void* mgpuMemAlloc(uint64_t bytes, void* stream, bool /*isHostShared: never asked for*/) {
  CUdeviceptr pointer = 0;
  if (bytes == 0) // no tasks: nothing will be launched
    return nullptr;
  if (!check(current->driver->cuMemAllocAsync(&pointer, bytes, static_cast<CUstream>(stream)),
             "allocating the kernel's workspace (cuMemAllocAsync)"))
    return nullptr;
  return reinterpret_cast<void*>(pointer);
}

void mgpuMemFree(void* pointer, void* stream) {
  if (pointer)
    check(current->driver->cuMemFreeAsync(reinterpret_cast<CUdeviceptr>(pointer),
                                          static_cast<CUstream>(stream)),
          "cuMemFreeAsync");
}

// Runs are asynchronous on the caller's stream (attnc_run_options.stream): the caller
// synchronizes, as with any CUDA library, so back-to-back runs keep the GPU busy.
void mgpuStreamSynchronize(void*) {}

void mgpuLaunchKernel(void* function, intptr_t gridX, intptr_t gridY, intptr_t gridZ,
                      intptr_t blockX, intptr_t blockY, intptr_t blockZ, int32_t sharedBytes,
                      void* stream, void** params, void** extra, size_t) {
  if (!function || gridX == 0 || !current->error.empty())
    return; // nothing to run, or an earlier step of this run failed (its workspace, say)
  check(current->driver->cuLaunchKernel(
            static_cast<CUfunction>(function), static_cast<unsigned>(gridX),
            static_cast<unsigned>(gridY), static_cast<unsigned>(gridZ),
            static_cast<unsigned>(blockX), static_cast<unsigned>(blockY),
            static_cast<unsigned>(blockZ), static_cast<unsigned>(sharedBytes),
            static_cast<CUstream>(stream), params, extra),
        "cuLaunchKernel");
}

int32_t attnc_kernel_run(const attnc_kernel_call* call, char* message, size_t messageSize) {
  const bool holdsBackward = &attnc_mlir_backward_packed != nullptr;
  if (!attnc::acceptCall(*call, holdsBackward, message, messageSize))
    return 1;
  const bool backward = holdsBackward && call->entry == ATTNC_ENTRY_BACKWARD;
  void (*const kernel)(void**) = backward ? &attnc_mlir_backward_packed : &attnc_mlir_kernel_packed;
  // The contract first: it checks every rank and extent before anything reads the strides.
  if (auto problem = attnc::contractProblem(
          backward ? attnc_mlir_backward_shapes : attnc_mlir_kernel_shapes, *call)) {
    std::snprintf(message, messageSize, "mlir kernel: %s", problem->c_str());
    return ATTNC_ERROR_TENSOR_MISMATCH;
  }
  if (!alignedForMma(*call, backward ? &attnc_mma_backward_aligned_args : &attnc_mma_aligned_args,
                     message, messageSize))
    return ATTNC_ERROR_TENSOR_MISMATCH;
  Device device;
  std::string why;
  if (!useDevice(&device, &why)) {
    std::snprintf(message, messageSize, "%s", why.c_str());
    return 1;
  }
  RunState state{driver(nullptr), static_cast<CUstream>(call->stream), {}};
  current = &state;
  attnc::mlirkernel::Descriptors descriptors(*call);
  attnc::mlirkernel::callPacked<void>(reinterpret_cast<void*>(kernel), call->num_args,
                                      descriptors.pointers.data());
  current = nullptr;
  if (!state.error.empty()) {
    std::snprintf(message, messageSize, "%s", state.error.c_str());
    return 1;
  }
  return 0;
}

} // extern "C"
