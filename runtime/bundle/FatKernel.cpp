// The entry of a fat bundle or linked library (Backends/FatBundle.cpp). The generated table
// lists each target's run function, best first; the runtime calls the one it picks. This
// attnc_kernel_run, what a runtime that predates fat bundles calls, runs the last target: the
// one the most hosts support, which such a runtime reads from the manifest's "target".
#include "KernelRunner.h"

extern "C" {
extern const int64_t attnc_target_count;
extern const attnc_kernel_run_fn attnc_kernel_target_runs[];

int32_t attnc_kernel_run(const attnc_kernel_call* call, char* message, size_t messageSize) {
  return attnc_kernel_target_runs[attnc_target_count - 1](call, message, messageSize);
}
}
