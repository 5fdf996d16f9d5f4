// The kernel entry of MLIR CPU bundles: DLPack tensors become memref descriptors, and the
// kernel's phases (RoPE's rotations, then the attention: one task per batch, head and query
// tile) run one after the other, each phase's tasks on the attnc runtime's thread pool. A
// backward=true bundle holds a second kernel, the backward entry's, with the same functions
// under the name attnc_mlir_backward (MlirBackwardKernelEntry.cpp).
//
// The llvm stage made four C-interface functions from the kernel (attn-outline-tasks):
//   int64_t _mlir_ciface_attnc_mlir_kernel_phases()
//   int64_t _mlir_ciface_attnc_mlir_kernel_workspace(Memref *arg0, ...)
//   int64_t _mlir_ciface_attnc_mlir_kernel_tasks(int64_t phase, Memref *arg0, ...)
//   void    _mlir_ciface_attnc_mlir_kernel_run(int64_t phase, int64_t first, int64_t last,
//                                               Memref *arg0, ..., Memref *workspace)
// with one descriptor per argument of the manifest, in its order, and the workspace (bytes, a
// 1-d i8 memref) taken here once per call from the bundle's WorkspacePool; each is called
// through its packed interface (MemrefCall.h), whatever the number of arguments.
// attnc_mlir_run takes those as pointers (kernels[0..3]), with the kernel's shape contract
// (kernels[4], bundle/ShapeContract.h): MlirKernelEntry.cpp passes a plain bundle's, a
// shape-dispatch bundle the one it picks. The generated code takes every static size from its
// types, so the entry refuses tensors that break the contract before the kernel sees them.
#include "CallCheck.h"
#include "KernelRunner.h"
#include "MemrefCall.h"
#include "ShapeContract.h"
#include "WorkspacePool.h"

#include <algorithm>

namespace {

using attnc::mlirkernel::Memref;

struct Launch {
  void* run; // the packed _run
  int64_t phase;
  uint32_t count; // the arguments and the workspace
  Memref** args;
};

void runOne(void* opaque, int64_t task) {
  auto* launch = static_cast<Launch*>(opaque);
  attnc::mlirkernel::callPacked<void>(launch->run, launch->count, launch->args, launch->phase,
                                      task, task + 1);
}

attnc::mlirkernel::WorkspacePool& workspacePool() {
  static attnc::mlirkernel::WorkspacePool pool; // freed when the bundle is unloaded
  return pool;
}

// One kernel's phases in order, after its shape contract's check.
int32_t runPhases(const attnc_kernel_call* call, char* message, size_t messageSize,
                  void* const* kernels) {
  if (auto problem = attnc::contractProblem(static_cast<const char*>(kernels[4]), *call)) {
    std::snprintf(message, messageSize, "mlir kernel: %s", problem->c_str());
    return ATTNC_ERROR_TENSOR_MISMATCH;
  }
  attnc::mlirkernel::Descriptors descriptors(*call);
  Memref** args = descriptors.pointers.data();
  const int64_t phaseCount = attnc::mlirkernel::callPacked<int64_t>(kernels[0], 0, args);
  const auto workspaceBytes =
      attnc::mlirkernel::callPacked<int64_t>(kernels[1], call->num_args, args);
  const attnc::mlirkernel::WorkspacePool::Lease workspace =
      workspacePool().take(static_cast<size_t>(std::max<int64_t>(workspaceBytes, 0)));
  if (workspaceBytes > 0 && !workspace.data()) {
    std::snprintf(message, messageSize, "mlir kernel: cannot allocate %lld bytes of workspace",
                  static_cast<long long>(workspaceBytes));
    return 1;
  }
  Memref workspaceDescriptor{};
  workspaceDescriptor.allocated = workspaceDescriptor.aligned = workspace.data();
  workspaceDescriptor.sizesAndStrides[0] = workspaceBytes;
  workspaceDescriptor.sizesAndStrides[1] = 1;
  args[call->num_args] = &workspaceDescriptor;

  for (int64_t phase = 0; phase < phaseCount; ++phase) {
    Launch launch{kernels[3], phase, call->num_args + 1, args};
    const auto tasks =
        attnc::mlirkernel::callPacked<int64_t>(kernels[2], call->num_args, args, phase);
    call->parallel_for(call->pool, tasks, runOne, &launch, call->num_threads);
  }
  return 0;
}

} // namespace

extern "C" int32_t attnc_mlir_run(const attnc_kernel_call* call, char* message, size_t messageSize,
                                  void* const* kernels) {
  if (!attnc::acceptCall(*call, /*holdsBackward=*/false, message, messageSize))
    return 1;
  return runPhases(call, message, messageSize, kernels);
}

extern "C" int32_t attnc_mlir_run_entries(const attnc_kernel_call* call, char* message,
                                          size_t messageSize, void* const* forward,
                                          void* const* backward) {
  if (!attnc::acceptCall(*call, /*holdsBackward=*/true, message, messageSize))
    return 1;
  return runPhases(call, message, messageSize,
                   call->entry == ATTNC_ENTRY_BACKWARD ? backward : forward);
}
