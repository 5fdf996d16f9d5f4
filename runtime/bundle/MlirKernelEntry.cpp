// The entry of an MLIR CPU bundle with one kernel: the outlined functions of the llvm stage run
// by attnc_mlir_run. A separate archive member, so a shape-dispatch bundle, which defines its
// own attnc_kernel_run, links the runner without it.
#include "KernelRunner.h"

extern "C" {
void _mlir_ciface_attnc_mlir_kernel_phases();
void _mlir_ciface_attnc_mlir_kernel_workspace();
void _mlir_ciface_attnc_mlir_kernel_tasks();
void _mlir_ciface_attnc_mlir_kernel_run();
extern const char attnc_mlir_kernel_shapes[]; // bundle/ShapeContract.h
}

extern "C" int32_t attnc_kernel_run(const attnc_kernel_call* call, char* message,
                                    size_t messageSize) {
  void* const kernels[ATTNC_KERNEL_SYMBOLS] = {
      reinterpret_cast<void*>(&_mlir_ciface_attnc_mlir_kernel_phases),
      reinterpret_cast<void*>(&_mlir_ciface_attnc_mlir_kernel_workspace),
      reinterpret_cast<void*>(&_mlir_ciface_attnc_mlir_kernel_tasks),
      reinterpret_cast<void*>(&_mlir_ciface_attnc_mlir_kernel_run),
      const_cast<char*>(attnc_mlir_kernel_shapes)};
  return attnc_mlir_run(call, message, messageSize, kernels);
}
