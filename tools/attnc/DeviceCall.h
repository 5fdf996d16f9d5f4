// A call's tensors mirrored in CUDA device memory, for running GPU bundles from the tools:
// inputs are copied in when it is made, outputs copied back on request.
#ifndef ATTNC_TOOLS_ATTNC_DEVICECALL_H
#define ATTNC_TOOLS_ATTNC_DEVICECALL_H

#include "CallSetup.h"
#include "attnc/CudaDriver.hpp"
#include "attnc/Runtime.hpp"

#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace attnc::tools {

// True when the target the bundle runs (of a fat bundle's, the runtime's choice) is on device
// "cuda".
bool runsOnGpu(const runtime::Bundle& bundle);

class DeviceCall {
public:
  // Throws JobError naming why when there is no usable GPU or an allocation or copy fails.
  explicit DeviceCall(Call& call);
  ~DeviceCall();
  DeviceCall(const DeviceCall&) = delete;
  DeviceCall& operator=(const DeviceCall&) = delete;

  std::vector<attnc_named_tensor> named();
  void copyOutputsBack();

private:
  Call& call_;
  std::vector<cuda::CUdeviceptr> buffers_;
  std::vector<DLTensor> views_;
};

// Times GPU runs as Triton's do_bench does: before each, the L2 cache is flushed by writing a
// buffer larger than it; CUDA events on the default stream bracket the run, so the time is
// the GPU's, not the launch's.
class GpuTimer {
public:
  GpuTimer(); // throws JobError as DeviceCall does
  ~GpuTimer();
  GpuTimer(const GpuTimer&) = delete;
  GpuTimer& operator=(const GpuTimer&) = delete;

  // Milliseconds of GPU time for run(), which launches on the default stream.
  double millis(const std::function<void()>& run);

private:
  cuda::CUevent start_ = nullptr;
  cuda::CUevent end_ = nullptr;
  cuda::CUdeviceptr flush_ = 0;
};

// Where a bundle runs on a call's tensors and how its runs are timed: in place and by the
// wall clock for CPU bundles; on device copies (DeviceCall) and by CUDA events (GpuTimer) for
// GPU bundles. Every bundle run through one of these must target the same device.
class TimedCall {
public:
  // flushCpuCaches: before each CPU run, write over a buffer twice the last-level cache, so
  // that no run finds the inputs cached by the one before (GPU runs always flush the L2).
  TimedCall(const runtime::Bundle& bundle, Call& call, bool flushCpuCaches = false);

  // Milliseconds of one run of `bundle` (the first bundle or another of the same spec) on all
  // the tensors, or on `tensors`, some of them, for a bundle of another spec.
  double millis(const runtime::Bundle& bundle, int32_t threads);
  double millis(const runtime::Bundle& bundle, int32_t threads,
                std::span<const attnc_named_tensor> tensors);
  // The tensors as the bundles take them.
  const std::vector<attnc_named_tensor>& named() const { return named_; }
  // Makes the outputs of the last run visible in the call's host tensors.
  void copyOutputsBack();

private:
  attnc_entry entry_; // the call's: which of the bundle's entries runs
  std::unique_ptr<DeviceCall> device_;
  std::unique_ptr<GpuTimer> timer_;
  std::vector<attnc_named_tensor> named_;
  std::vector<unsigned char> flush_; // empty: CPU caches are not flushed
};

} // namespace attnc::tools

#endif // ATTNC_TOOLS_ATTNC_DEVICECALL_H
