// The entry of an MLIR CPU bundle with backward=true: the forward kernel's outlined functions
// and the backward's (attnc_mlir_backward), run by attnc_mlir_run_entries as the call's entry
// asks. An archive of its own (attnc_bundle_mlir_backward), linked before attnc_bundle_mlir, so
// its attnc_kernel_run is the one the bundle takes.
#include "KernelRunner.h"

extern "C" {
// The packed interfaces (MemrefCall.h) and shape contracts (bundle/ShapeContract.h).
void attnc_mlir_kernel_phases_packed(void**);
void attnc_mlir_kernel_workspace_packed(void**);
void attnc_mlir_kernel_tasks_packed(void**);
void attnc_mlir_kernel_run_packed(void**);
extern const char attnc_mlir_kernel_shapes[];
void attnc_mlir_backward_phases_packed(void**);
void attnc_mlir_backward_workspace_packed(void**);
void attnc_mlir_backward_tasks_packed(void**);
void attnc_mlir_backward_run_packed(void**);
extern const char attnc_mlir_backward_shapes[];
}

extern "C" int32_t attnc_kernel_run(const attnc_kernel_call* call, char* message,
                                    size_t messageSize) {
  void* const forward[ATTNC_KERNEL_SYMBOLS] = {
      reinterpret_cast<void*>(&attnc_mlir_kernel_phases_packed),
      reinterpret_cast<void*>(&attnc_mlir_kernel_workspace_packed),
      reinterpret_cast<void*>(&attnc_mlir_kernel_tasks_packed),
      reinterpret_cast<void*>(&attnc_mlir_kernel_run_packed),
      const_cast<char*>(attnc_mlir_kernel_shapes)};
  void* const backward[ATTNC_KERNEL_SYMBOLS] = {
      reinterpret_cast<void*>(&attnc_mlir_backward_phases_packed),
      reinterpret_cast<void*>(&attnc_mlir_backward_workspace_packed),
      reinterpret_cast<void*>(&attnc_mlir_backward_tasks_packed),
      reinterpret_cast<void*>(&attnc_mlir_backward_run_packed),
      const_cast<char*>(attnc_mlir_backward_shapes)};
  return attnc_mlir_run_entries(call, message, messageSize, forward, backward);
}
