#include "DeviceCall.h"

#include "Support/Errors.h"
#include "attnc/CudaDriver.hpp"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <unistd.h>

namespace attnc::tools {
namespace {

const cuda::Driver& gpu() {
  cuda::Device device;
  std::string why;
  if (!cuda::useDevice(&device, &why))
    throw JobError("this bundle runs on an NVIDIA GPU: " + why);
  return *cuda::driver(nullptr);
}

void check(const cuda::Driver& d, cuda::CUresult result, const std::string& what) {
  if (result != cuda::kSuccess)
    throw JobError(what + " failed: " + cuda::errorText(d, result));
}

} // namespace

bool runsOnGpu(const runtime::Bundle& bundle) {
  auto manifest = nlohmann::json::parse(bundle.manifest());
  // A fat bundle runs the one of its targets the runtime chose.
  for (const nlohmann::json& target : manifest.value("targets", nlohmann::json::array()))
    if (target.value("name", "") == bundle.target())
      return target.value("device", "cpu") == "cuda";
  return manifest["target"].value("device", "cpu") == "cuda";
}

DeviceCall::DeviceCall(Call& call) : call_(call) {
  const cuda::Driver& d = gpu();
  for (HostTensor& host : call.tensors) {
    cuda::CUdeviceptr buffer = 0;
    check(d, d.cuMemAlloc(&buffer, std::max<size_t>(host.bytes(), 1)),
          "allocating " + std::to_string(host.bytes()) + " bytes on the GPU");
    buffers_.push_back(buffer);
    check(d, d.cuMemcpyHtoD(buffer, host.data(), host.bytes()), "copying an input to the GPU");
    DLTensor view = host.view();
    view.data = reinterpret_cast<void*>(buffer);
    view.device = {kDLCUDA, 0};
    views_.push_back(view);
  }
}

DeviceCall::~DeviceCall() {
  const cuda::Driver* d = cuda::driver(nullptr);
  for (cuda::CUdeviceptr buffer : buffers_)
    d->cuMemFree(buffer);
}

std::vector<attnc_named_tensor> DeviceCall::named() {
  std::vector<attnc_named_tensor> named;
  for (size_t i = 0; i < views_.size(); ++i)
    named.push_back({call_.arguments[i].name.c_str(), &views_[i]});
  return named;
}

// Larger than the L2 of any current GPU (50 MiB on H100/H200), as do_bench's 256 MB.
constexpr size_t kFlushBytes = size_t(256) << 20;

GpuTimer::GpuTimer() {
  const cuda::Driver& d = gpu();
  check(d, d.cuEventCreate(&start_, 0), "cuEventCreate");
  check(d, d.cuEventCreate(&end_, 0), "cuEventCreate");
  check(d, d.cuMemAlloc(&flush_, kFlushBytes), "allocating the L2 flush buffer");
}

GpuTimer::~GpuTimer() {
  const cuda::Driver* d = cuda::driver(nullptr);
  d->cuEventDestroy(start_);
  d->cuEventDestroy(end_);
  d->cuMemFree(flush_);
}

double GpuTimer::millis(const std::function<void()>& run) {
  const cuda::Driver& d = *cuda::driver(nullptr);
  check(d, d.cuMemsetD8(flush_, 0, kFlushBytes), "flushing the L2 cache");
  check(d, d.cuEventRecord(start_, nullptr), "cuEventRecord");
  run();
  check(d, d.cuEventRecord(end_, nullptr), "cuEventRecord");
  check(d, d.cuEventSynchronize(end_), "the GPU run (cuEventSynchronize)");
  float ms = 0;
  check(d, d.cuEventElapsedTime(&ms, start_, end_), "cuEventElapsedTime");
  return ms;
}

TimedCall::TimedCall(const runtime::Bundle& bundle, Call& call, bool flushCpuCaches)
    : entry_(call.entry) {
  if (runsOnGpu(bundle)) {
    device_ = std::make_unique<DeviceCall>(call);
    timer_ = std::make_unique<GpuTimer>();
  } else if (flushCpuCaches) {
    const long lastLevel = std::max(sysconf(_SC_LEVEL3_CACHE_SIZE), sysconf(_SC_LEVEL2_CACHE_SIZE));
    flush_.resize(std::max<size_t>(2 * static_cast<size_t>(std::max(lastLevel, 0L)), 64u << 20));
  }
  named_ = device_ ? device_->named() : call.named();
}

double TimedCall::millis(const runtime::Bundle& bundle, int32_t threads) {
  return millis(bundle, threads, named_);
}

double TimedCall::millis(const runtime::Bundle& bundle, int32_t threads,
                         std::span<const attnc_named_tensor> tensors) {
  auto run = [&] {
    if (entry_ == ATTNC_ENTRY_BACKWARD)
      bundle.runBackward(tensors, threads);
    else
      bundle.run(tensors, threads);
  };
  if (timer_)
    return timer_->millis(run);
  if (!flush_.empty()) {
    // Read-modify-write every line: the buffer displaces the inputs and outputs.
    for (size_t i = 0; i < flush_.size(); i += 64)
      flush_[i] = static_cast<unsigned char>(flush_[i] + 1);
    asm volatile("" : : "r"(flush_.data()) : "memory"); // keep the writes
  }
  auto start = std::chrono::steady_clock::now();
  run();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

void TimedCall::copyOutputsBack() {
  if (device_)
    device_->copyOutputsBack();
}

void DeviceCall::copyOutputsBack() {
  const cuda::Driver& d = *cuda::driver(nullptr);
  for (size_t i = 0; i < views_.size(); ++i)
    if (call_.arguments[i].role == ArgumentRole::Output)
      check(d, d.cuMemcpyDtoH(call_.tensors[i].data(), buffers_[i], call_.tensors[i].bytes()),
            "copying " + call_.arguments[i].name + " back from the GPU");
}

} // namespace attnc::tools
