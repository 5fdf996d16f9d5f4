// The kernel entry of reference bundles: binds the call's tensors to the spec embedded in the
// bundle's manifest (its kernelSpec) and runs the f64 reference on the
// runtime's thread pool.
#include "Abi/Manifest.h"
#include "Reference/Reference.h"
#include "attnc/attnc.h"
#include "bundle/CallCheck.h"

#include <cstdio>
#include <exception>
#include <mutex>

extern "C" {
extern const char attnc_kernel_manifest[]; // from the bundle's generated manifest object
// Protected: exported, yet calls from inside this bundle never bind to another bundle's.
__attribute__((visibility("protected"))) int32_t
attnc_kernel_run(const attnc_kernel_call* call, char* message, size_t messageSize);
}

namespace {

// The spec of one call: the runtime prepares a ragged batch's and new rows' (kernelSpec).
const attnc::Spec& bundleSpec() {
  static const attnc::Spec spec =
      attnc::manifestSpec(nlohmann::json::parse(attnc_kernel_manifest)).kernelSpec();
  return spec;
}

// Runs the bodies on the runtime's pool. A body's exception must not unwind through the C
// pool, so the first one is kept and rethrown here after the loop.
attnc::ParallelFor poolFor(const attnc_kernel_call* call) {
  return [call](int64_t count, const std::function<void(int64_t)>& body) {
    struct Context {
      const std::function<void(int64_t)>* body;
      std::exception_ptr error;
      std::mutex mutex;
    } context{&body, nullptr, {}};
    auto task = [](void* opaque, int64_t index) {
      auto* c = static_cast<Context*>(opaque);
      try {
        (*c->body)(index);
      } catch (...) {
        std::lock_guard lock(c->mutex);
        if (!c->error)
          c->error = std::current_exception();
      }
    };
    call->parallel_for(call->pool, count, task, &context, call->num_threads);
    if (context.error)
      std::rethrow_exception(context.error);
  };
}

} // namespace

int32_t attnc_kernel_run(const attnc_kernel_call* call, char* message, size_t messageSize) {
  try {
    const attnc::Spec& spec = bundleSpec();
    if (!attnc::acceptCall(*call, spec.backward, message, messageSize))
      return 1;
    std::vector<DLTensor*> args(call->args, call->args + call->num_args);
    if (call->entry == ATTNC_ENTRY_BACKWARD) {
      attnc::KernelTensors tensors(spec, attnc::backwardArguments(spec), std::move(args),
                                   call->batch, call->seq_q, call->seq_k);
      attnc::runReferenceBackward(tensors, poolFor(call));
    } else {
      attnc::KernelTensors tensors(spec, std::move(args), call->batch, call->seq_q, call->seq_k);
      attnc::runReference(tensors, poolFor(call));
    }
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(message, messageSize, "%s", e.what());
    return 1;
  }
}
