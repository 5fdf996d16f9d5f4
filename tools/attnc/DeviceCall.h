// A call's tensors mirrored in CUDA device memory, for running GPU bundles from the tools:
// inputs are copied in when it is made, outputs copied back on request.
#ifndef ATTNC_TOOLS_DEVICECALL_H
#define ATTNC_TOOLS_DEVICECALL_H

#include "CallSetup.h"
#include "attnc/Runtime.hpp"

#include <memory>
#include <vector>

namespace attnc::tools {

// True when the bundle's manifest targets device "cuda".
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
  std::vector<unsigned long long> buffers_; // CUdeviceptr per tensor
  std::vector<DLTensor> views_;
};

} // namespace attnc::tools

#endif // ATTNC_TOOLS_DEVICECALL_H
