// The entry of an MLIR CPU bundle with one kernel: the outlined functions of the llvm stage run
// by attnc_mlir_run. A separate archive member, so a shape-dispatch bundle, which defines its
// own attnc_kernel_run, links the runner without it.
#include "KernelRunner.h"

extern "C" {
// The packed interfaces (MemrefCall.h).
void attnc_mlir_kernel_phases_packed(void**);
void attnc_mlir_kernel_workspace_packed(void**);
void attnc_mlir_kernel_tasks_packed(void**);
void attnc_mlir_kernel_run_packed(void**);
extern const char attnc_mlir_kernel_shapes[]; // bundle/ShapeContract.h
}

extern "C" int32_t attnc_kernel_run(const attnc_kernel_call* call, char* message,
                                    size_t messageSize) {
  void* const kernels[ATTNC_KERNEL_SYMBOLS] = {
      reinterpret_cast<void*>(&attnc_mlir_kernel_phases_packed),
      reinterpret_cast<void*>(&attnc_mlir_kernel_workspace_packed),
      reinterpret_cast<void*>(&attnc_mlir_kernel_tasks_packed),
      reinterpret_cast<void*>(&attnc_mlir_kernel_run_packed),
      const_cast<char*>(attnc_mlir_kernel_shapes)};
  return attnc_mlir_run(call, message, messageSize, kernels);
}
