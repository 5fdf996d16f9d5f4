// The CUDA driver API, loaded at run time with dlopen("libcuda.so.1"): attnc never links CUDA
// at build time and runs on machines without it. Only the handful of entry points the runtime,
// GPU bundles and the tools use are resolved; their types are the driver's documented ABI.
#ifndef ATTNC_CUDADRIVER_HPP
#define ATTNC_CUDADRIVER_HPP

#include <cstddef>
#include <string>

#if defined(__GNUC__)
#define ATTNC_CUDA_API __attribute__((visibility("default")))
#else
#define ATTNC_CUDA_API
#endif

namespace attnc::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;

inline constexpr CUresult kSuccess = 0;
inline constexpr int kAttrComputeCapabilityMajor = 75; // CU_DEVICE_ATTRIBUTE_*
inline constexpr int kAttrComputeCapabilityMinor = 76;
inline constexpr int kJitErrorLogBuffer = 5; // CU_JIT_* options
inline constexpr int kJitErrorLogBufferSize = 6;
inline constexpr int kJitOptimizationLevel = 7;

struct Driver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuModuleLoadDataEx)(CUmodule*, const void*, unsigned, int*, void**);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*cuMemAllocAsync)(CUdeviceptr*, size_t, CUstream); // stream-ordered (CUDA 11.2)
  CUresult (*cuMemFreeAsync)(CUdeviceptr, CUstream);
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuGetErrorString)(CUresult, const char**);
};

// The driver, loaded and initialised once per process; nullptr when there is none, with the
// reason ("libcuda.so.1 not found: ...", "cuInit failed: no CUDA-capable device") in *why.
ATTNC_CUDA_API const Driver* driver(std::string* why);

// "CUDA_ERROR_...: text" for a failed call.
ATTNC_CUDA_API std::string errorText(const Driver& d, CUresult result);

struct Device {
  CUdevice handle;
  std::string name;
  int major, minor;  // compute capability
  int driverVersion; // e.g. 12040 for CUDA 12.4
};

// Device 0, with its primary context (retained once per process) made current on the calling
// thread; false and *why when there is no driver or no device.
ATTNC_CUDA_API bool useDevice(Device* device, std::string* why);

} // namespace attnc::cuda

#endif // ATTNC_CUDADRIVER_HPP
