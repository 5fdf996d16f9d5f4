#include "attnc/CudaDriver.hpp"

#include <dlfcn.h>
#include <mutex>

namespace attnc::cuda {
namespace {

struct Loaded {
  Driver api{};
  std::string why; // empty when api is usable
};

template <class Fn> bool resolve(void* library, const char* name, Fn& fn, std::string& why) {
  fn = reinterpret_cast<Fn>(dlsym(library, name));
  if (!fn)
    why = std::string("libcuda.so.1 lacks ") + name + " (driver too old?)";
  return fn != nullptr;
}

Loaded load() {
  Loaded l;
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char* error = dlerror();
    l.why = std::string("no NVIDIA driver: libcuda.so.1 cannot be loaded (") +
            (error ? error : "unknown") + ")";
    return l;
  }
  Driver& d = l.api;
  std::string& why = l.why;
  bool ok = resolve(library, "cuInit", d.cuInit, why) &&
            resolve(library, "cuDriverGetVersion", d.cuDriverGetVersion, why) &&
            resolve(library, "cuDeviceGetCount", d.cuDeviceGetCount, why) &&
            resolve(library, "cuDeviceGet", d.cuDeviceGet, why) &&
            resolve(library, "cuDeviceGetAttribute", d.cuDeviceGetAttribute, why) &&
            resolve(library, "cuDeviceGetName", d.cuDeviceGetName, why) &&
            resolve(library, "cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain, why) &&
            resolve(library, "cuCtxGetCurrent", d.cuCtxGetCurrent, why) &&
            resolve(library, "cuCtxSetCurrent", d.cuCtxSetCurrent, why) &&
            resolve(library, "cuModuleLoadDataEx", d.cuModuleLoadDataEx, why) &&
            resolve(library, "cuModuleGetFunction", d.cuModuleGetFunction, why) &&
            resolve(library, "cuLaunchKernel", d.cuLaunchKernel, why) &&
            resolve(library, "cuStreamSynchronize", d.cuStreamSynchronize, why) &&
            resolve(library, "cuMemAlloc_v2", d.cuMemAlloc, why) &&
            resolve(library, "cuMemFree_v2", d.cuMemFree, why) &&
            resolve(library, "cuMemcpyHtoD_v2", d.cuMemcpyHtoD, why) &&
            resolve(library, "cuMemcpyDtoH_v2", d.cuMemcpyDtoH, why) &&
            resolve(library, "cuMemsetD8_v2", d.cuMemsetD8, why) &&
            resolve(library, "cuMemAllocAsync", d.cuMemAllocAsync, why) &&
            resolve(library, "cuMemFreeAsync", d.cuMemFreeAsync, why) &&
            resolve(library, "cuEventCreate", d.cuEventCreate, why) &&
            resolve(library, "cuEventRecord", d.cuEventRecord, why) &&
            resolve(library, "cuEventSynchronize", d.cuEventSynchronize, why) &&
            resolve(library, "cuEventElapsedTime", d.cuEventElapsedTime, why) &&
            resolve(library, "cuEventDestroy_v2", d.cuEventDestroy, why) &&
            resolve(library, "cuGetErrorString", d.cuGetErrorString, why);
  if (ok) {
    CUresult result = d.cuInit(0);
    if (result != kSuccess)
      why = "cuInit failed: " + errorText(d, result);
  }
  return l;
}

} // namespace

const Driver* driver(std::string* why) {
  static std::once_flag once;
  static Loaded loaded;
  std::call_once(once, [] { loaded = load(); });
  if (!loaded.why.empty()) {
    if (why)
      *why = loaded.why;
    return nullptr;
  }
  return &loaded.api;
}

std::string errorText(const Driver& d, CUresult result) {
  const char* text = nullptr;
  if (d.cuGetErrorString && d.cuGetErrorString(result, &text) == kSuccess && text)
    return std::string(text) + " (CUresult " + std::to_string(result) + ")";
  return "CUresult " + std::to_string(result);
}

namespace {

// Device 0 and its primary context, retained once per process.
struct PrimaryDevice {
  Device info{};
  CUcontext context = nullptr;
  std::string why; // empty when usable
};

PrimaryDevice findDevice(const Driver& d) {
  PrimaryDevice p;
  int count = 0;
  CUresult r = d.cuDeviceGetCount(&count);
  if (r != kSuccess || count == 0) {
    p.why = r != kSuccess ? "cuDeviceGetCount failed: " + errorText(d, r)
                          : "the NVIDIA driver sees no device";
    return p;
  }
  char name[256] = {};
  Device& info = p.info;
  if ((r = d.cuDeviceGet(&info.handle, 0)) != kSuccess ||
      (r = d.cuDeviceGetAttribute(&info.major, kAttrComputeCapabilityMajor, info.handle)) !=
          kSuccess ||
      (r = d.cuDeviceGetAttribute(&info.minor, kAttrComputeCapabilityMinor, info.handle)) !=
          kSuccess ||
      (r = d.cuDeviceGetName(name, sizeof name, info.handle)) != kSuccess ||
      (r = d.cuDriverGetVersion(&info.driverVersion)) != kSuccess ||
      (r = d.cuDevicePrimaryCtxRetain(&p.context, info.handle)) != kSuccess) {
    p.why = "setting up CUDA device 0 failed: " + errorText(d, r);
    return p;
  }
  info.name = name;
  return p;
}

} // namespace

bool useDevice(Device* device, std::string* why) {
  const Driver* d = driver(why);
  if (!d)
    return false;
  static std::once_flag once;
  static PrimaryDevice primary;
  std::call_once(once, [&] { primary = findDevice(*d); });
  if (!primary.why.empty()) {
    *why = primary.why;
    return false;
  }
  if (CUresult r = d->cuCtxSetCurrent(primary.context); r != kSuccess) {
    *why = "making CUDA device 0's context current failed: " + errorText(*d, r);
    return false;
  }
  *device = primary.info;
  return true;
}

} // namespace attnc::cuda
