// The kernel entry of MLIR CPU bundles: DLPack tensors become memref descriptors, and the
// kernel's tasks (one per batch, head and query tile) run on the attnc runtime's thread pool.
//
// The llvm stage made two C-interface functions from the kernel (attn-outline-tasks):
//   int64_t _mlir_ciface_attnc_mlir_kernel_tasks(Memref *arg0, ...)
//   void    _mlir_ciface_attnc_mlir_kernel_run(int64_t first, int64_t last, Memref *arg0, ...)
// with one descriptor per argument of the manifest, in its order.
// attnc_mlir_run takes them as pointers (kernels[0], kernels[1]), with the kernel's shape
// contract (kernels[2], bundle/ShapeContract.h): MlirKernelEntry.cpp passes a plain bundle's,
// a shape-dispatch bundle the one it picks. The generated code takes every static size from its
// types, so the entry refuses tensors that break the contract before the kernel sees them.
#include "KernelRunner.h"
#include "MemrefCall.h"
#include "ShapeContract.h"

namespace {

using attnc::mlirkernel::Memref;

// Called through pointers of the right arity (MemrefCall.h).
using KernelFunction = void (*)();

struct Launch {
  KernelFunction run;
  uint32_t count;
  Memref** args;
};

void runOne(void* opaque, int64_t task) {
  auto* launch = static_cast<Launch*>(opaque);
  attnc::mlirkernel::callWithMemrefs<void>(launch->run, launch->count, launch->args, task,
                                           task + 1);
}

} // namespace

extern "C" int32_t attnc_mlir_run(const attnc_kernel_call* call, char* message, size_t messageSize,
                                  void* const* kernels) {
  if (!attnc::mlirkernel::acceptCall(*call, message, messageSize))
    return 1;
  if (auto problem = attnc::contractProblem(static_cast<const char*>(kernels[2]), *call)) {
    std::snprintf(message, messageSize, "mlir kernel: %s", problem->c_str());
    return 1;
  }
  attnc::mlirkernel::Descriptors descriptors(*call);
  Launch launch{reinterpret_cast<KernelFunction>(kernels[1]), call->num_args,
                descriptors.pointers.data()};
  int64_t tasks = attnc::mlirkernel::callWithMemrefs<int64_t>(
      reinterpret_cast<KernelFunction>(kernels[0]), call->num_args, descriptors.pointers.data());
  call->parallel_for(call->pool, tasks, runOne, &launch, call->num_threads);
  return 0;
}
