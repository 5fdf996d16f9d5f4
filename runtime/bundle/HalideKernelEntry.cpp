// The entry of a Halide bundle with one kernel: the generated pipeline (HalideBackend.cpp
// compiles it as attnc_halide_kernel) run by attnc_halide_run. A separate archive member, so a
// shape-dispatch bundle, which defines its own attnc_kernel_run, links the runner without it.
#include "KernelRunner.h"

extern "C" int attnc_halide_kernel_argv(void** args);

extern "C" int32_t attnc_kernel_run(const attnc_kernel_call* call, char* message,
                                    size_t messageSize) {
  void* const kernels[] = {reinterpret_cast<void*>(&attnc_halide_kernel_argv)};
  return attnc_halide_run(call, message, messageSize, kernels);
}
