// The kernel entry of Halide bundles: DLPack tensors become halide_buffer_t's, and the Halide
// runtime's thread pool and error reporting are routed to the attnc runtime's call.
//
// Built twice: for CPU bundles, and with ATTNC_HALIDE_CUDA for CUDA bundles, where tensors are
// device pointers wrapped for Halide's CUDA runtime, and that runtime uses the device's
// primary context (as the attnc tools and most applications do), the caller's stream and the
// driver's usual file name, libcuda.so.1.
#include "CallCheck.h"
#include "KernelRunner.h"
#include "attnc/TensorSpan.hpp"

#include <HalideRuntime.h>
#if ATTNC_HALIDE_CUDA
#include "attnc/CudaDriver.hpp"

#include <HalideRuntimeCuda.h>
#include <cstring>
#include <dlfcn.h>
#include <mutex>
#endif
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace {

// The user context every generated function passes back to the runtime hooks below.
struct CallContext {
  const attnc_kernel_call* call;
  char* message;
  size_t messageSize;
};

struct ParallelLoop {
  halide_task_t task;
  void* userContext;
  int min;
  uint8_t* closure;
  std::atomic<int> result{0};
};

void runTask(void* opaque, int64_t index) {
  auto* loop = static_cast<ParallelLoop*>(opaque);
  int result = loop->task(loop->userContext, loop->min + static_cast<int>(index), loop->closure);
  if (result != 0)
    loop->result.store(result);
}

// Halide kernels index buffers with 32-bit integers (the targets have no large_buffers):
// why tensor `t`, argument `index` of the call, is too large for them, or empty when it fits.
std::optional<std::string> beyondInt32(const DLTensor& t, uint32_t index) {
  constexpr int64_t kLimit = INT32_MAX;
  attnc::TensorSpan span;
  if (auto problem = attnc::measureSpan(t, span))
    return "argument " + std::to_string(index) + " " + *problem;
  if (span.elements == 0)
    return std::nullopt; // nothing to address (and its extents' product may not fit)
  int64_t largest = span.furthest + 1, compact = 1;
  for (int k = t.ndim - 1; k >= 0; --k) {
    largest = std::max({largest, t.shape[k], t.strides ? t.strides[k] : compact});
    compact *= t.shape[k];
  }
  if (largest <= kLimit)
    return std::nullopt;
  return "kernel argument " + std::to_string(index) + " spans " +
         std::to_string(largest) + " elements; Halide kernels index with 32 bits, up to " +
         std::to_string(kLimit) + " (the mlir backend indexes with 64)";
}

// DLPack shape [n0, ..., n_last] is Halide's (n_last, ..., n0): innermost first. The caller
// checked with beyondInt32 that extents and strides fit.
void describe(const DLTensor& t, halide_buffer_t& buffer, std::vector<halide_dimension_t>& dims) {
  dims.resize(t.ndim);
  int64_t compact = 1;
  for (int k = t.ndim - 1; k >= 0; --k) {
    halide_dimension_t& dim = dims[t.ndim - 1 - k];
    dim.min = 0;
    dim.extent = static_cast<int32_t>(t.shape[k]);
    dim.stride = static_cast<int32_t>(t.strides ? t.strides[k] : compact);
    dim.flags = 0;
    compact *= t.shape[k];
  }
  buffer = halide_buffer_t{};
#if ATTNC_HALIDE_CUDA
  if (t.device.device_type == kDLCUDA) {
    // Device data, already current: Halide copies nothing in and writes outputs in place.
    buffer.device = reinterpret_cast<uint64_t>(static_cast<uint8_t*>(t.data) + t.byte_offset);
    buffer.device_interface = halide_cuda_device_interface();
  } else
#endif
    buffer.host = static_cast<uint8_t*>(t.data) + t.byte_offset;
  // DLPack's and Halide's type codes agree: int 0, uint 1, float 2, bfloat 4.
  buffer.type.code = static_cast<halide_type_code_t>(t.dtype.code);
  buffer.type.bits = t.dtype.bits;
  buffer.type.lanes = t.dtype.lanes;
  buffer.dimensions = t.ndim;
  buffer.dim = dims.data();
}

#if ATTNC_HALIDE_CUDA
int acquirePrimaryContext(void*, void** context, bool) {
  attnc::cuda::Device device;
  std::string why;
  if (!attnc::cuda::useDevice(&device, &why))
    return -1;
  return attnc::cuda::driver(nullptr)->cuCtxGetCurrent(
             reinterpret_cast<attnc::cuda::CUcontext*>(context)) == attnc::cuda::kSuccess
             ? 0
             : -1;
}

int releaseContext(void*) {
  return 0;
}

int callerStream(void* userContext, void*, void** stream) {
  auto* context = static_cast<CallContext*>(userContext);
  *stream = context ? context->call->stream : nullptr;
  return 0;
}

void* loadLibrary(const char* name) {
  // Halide 14 asks for libcuda.so, which only the CUDA toolkit installs; drivers ship .so.1.
  if (std::strcmp(name, "libcuda.so") == 0)
    name = "libcuda.so.1";
  return dlopen(name, RTLD_LAZY | RTLD_LOCAL);
}

void useAttncCudaSetup() {
  static std::once_flag once;
  std::call_once(once, [] {
    halide_set_custom_load_library(loadLibrary);
    halide_set_cuda_acquire_context(acquirePrimaryContext);
    halide_set_cuda_release_context(releaseContext);
    halide_set_cuda_get_stream(callerStream);
  });
}
#endif

} // namespace

extern "C" {

// Parallel loops run on the attnc runtime's pool, honouring the caller's thread count, so every
// bundle in a process shares one pool whatever Halide runtime copies are loaded.
int halide_do_par_for(void* userContext, halide_task_t task, int min, int size, uint8_t* closure) {
  auto* context = static_cast<CallContext*>(userContext);
  ParallelLoop loop{task, userContext, min, closure};
  if (!context) { // not called through attnc_kernel_run: run serially
    for (int i = 0; i < size; ++i)
      runTask(&loop, i);
    return loop.result.load();
  }
  const attnc_kernel_call* call = context->call;
  call->parallel_for(call->pool, size, runTask, &loop, call->num_threads);
  return loop.result.load();
}

void halide_error(void* userContext, const char* message) {
  auto* context = static_cast<CallContext*>(userContext);
  if (context && context->message)
    std::snprintf(context->message, context->messageSize, "halide: %s", message);
}

int32_t attnc_halide_run(const attnc_kernel_call* call, char* message, size_t messageSize,
                         void* const* kernels) {
  if (!attnc::acceptCall(*call, /*holdsBackward=*/false, message, messageSize))
    return 1;
#if ATTNC_HALIDE_CUDA
  useAttncCudaSetup();
#endif
  CallContext context{call, message, messageSize};
  void* userContext = &context;
  std::vector<halide_buffer_t> buffers(call->num_args);
  std::vector<std::vector<halide_dimension_t>> dims(call->num_args);
  std::vector<void*> args{&userContext};
  for (uint32_t a = 0; a < call->num_args; ++a) {
    if (auto problem = beyondInt32(*call->args[a], a)) {
      std::snprintf(message, messageSize, "halide: %s", problem->c_str());
      return ATTNC_ERROR_TENSOR_MISMATCH;
    }
    describe(*call->args[a], buffers[a], dims[a]);
    args.push_back(&buffers[a]);
  }
  auto* pipeline = reinterpret_cast<int (*)(void**)>(kernels[0]);
  int result = pipeline(args.data());
  if (result != 0 && message[0] == '\0')
    std::snprintf(message, messageSize, "halide pipeline returned %d", result);
  return result == 0 ? 0 : 1;
}

} // extern "C"
