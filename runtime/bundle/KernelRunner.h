// How a bundle's entry runs a generated kernel. Each code generator's entry library provides a
// runner that takes the generated functions as pointers:
//   int32_t attnc_<backend>_run(const attnc_kernel_call*, char* message, size_t size,
//                              void* const* kernels);
// so a plain bundle's attnc_kernel_run is one call with its kernel's symbols, and a
// shape-dispatch bundle (ShapeDispatchKernel.cpp) holds several kernels, of either backend,
// and calls the runner of the one it picks.
#ifndef ATTNC_RUNTIME_BUNDLE_KERNELRUNNER_H
#define ATTNC_RUNTIME_BUNDLE_KERNELRUNNER_H

#include "attnc/attnc.h"

// The most pointers a runner takes (a shape-dispatch table's entries have room for them).
#define ATTNC_KERNEL_SYMBOLS 5

extern "C" {
typedef int32_t (*attnc_kernel_runner)(const attnc_kernel_call* call, char* message,
                                       size_t message_size, void* const* kernels);

// kernels[0]: the pipeline's argv entry, int (void** args).
int32_t attnc_halide_run(const attnc_kernel_call* call, char* message, size_t message_size,
                         void* const* kernels);
// kernels[0..3]: the packed interfaces of the outlined kernel's _phases, _workspace, _tasks
// and _run (MemrefCall.h); kernels[4]: its shape contract (ShapeContract.h).
int32_t attnc_mlir_run(const attnc_kernel_call* call, char* message, size_t message_size,
                       void* const* kernels);

// A bundle holding both entries (backward=true): the forward's kernel and the backward's, each
// as attnc_mlir_run takes one.
int32_t attnc_mlir_run_entries(const attnc_kernel_call* call, char* message, size_t message_size,
                               void* const* forward, void* const* backward);

// Protected: exported, yet calls from inside a bundle never bind to another bundle's.
__attribute__((visibility("protected"))) int32_t
attnc_kernel_run(const attnc_kernel_call* call, char* message, size_t message_size);
}

#endif // ATTNC_RUNTIME_BUNDLE_KERNELRUNNER_H
