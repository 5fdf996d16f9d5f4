// The kernel entry of MLIR CPU bundles: DLPack tensors become memref descriptors, and the
// kernel's tasks (one per batch, head and query tile) run on the attnc runtime's thread pool.
//
// The llvm stage made two C-interface functions from the kernel (attn-outline-tasks):
//   int64_t _mlir_ciface_attnc_mlir_kernel_tasks(Memref *arg0, ...)
//   void    _mlir_ciface_attnc_mlir_kernel_run(int64_t first, int64_t last, Memref *arg0, ...)
// with one descriptor per argument of the manifest, in its order.
#include "Backends/MLIR/MemrefCall.h"
#include "attnc/attnc.h"

extern "C" {
// Declared without parameters: they are called through pointers of the right arity.
void _mlir_ciface_attnc_mlir_kernel_tasks();
void _mlir_ciface_attnc_mlir_kernel_run();
__attribute__((visibility("protected"))) int32_t
attnc_kernel_run(const attnc_kernel_call* call, char* message, size_t messageSize);
}

namespace {

using attnc::mlirkernel::Memref;

struct Launch {
  uint32_t count;
  Memref** args;
};

void runOne(void* opaque, int64_t task) {
  auto* launch = static_cast<Launch*>(opaque);
  attnc::mlirkernel::callWithMemrefs<void>(&_mlir_ciface_attnc_mlir_kernel_run, launch->count,
                                           launch->args, task, task + 1);
}

} // namespace

extern "C" int32_t attnc_kernel_run(const attnc_kernel_call* call, char* message,
                                    size_t messageSize) {
  if (!attnc::mlirkernel::acceptCall(*call, message, messageSize))
    return 1;
  attnc::mlirkernel::Descriptors descriptors(*call);
  Launch launch{call->num_args, descriptors.pointers.data()};
  int64_t tasks = attnc::mlirkernel::callWithMemrefs<int64_t>(
      &_mlir_ciface_attnc_mlir_kernel_tasks, call->num_args, descriptors.pointers.data());
  call->parallel_for(call->pool, tasks, runOne, &launch, call->num_threads);
  return 0;
}
